// mirrored eval --checkpoint F --data F [--config F] [--batch N] [--json]
// The trainer's evaluation of saved parameters, data-parallel: under mpirun every rank
// scores its share of the samples and the sums are reduced, exactly as the trainer
// evaluates data.test. An image model reports loss and accuracy over every sample; a gpt
// the loss over the validation windows of a token file (gpt.context, eval_windows of the
// run), its perplexity and bits per byte.
#include <boost/program_options.hpp>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "commands.h"
#include "parse_options.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/data/token_dataset.h"
#include "mirrored/data/token_file.h"
#include "mirrored/distribute/distributed_token_dataset.h"
#include "mirrored/distribute/runtime.h"
#include "mirrored/distribute/strategy.h"
#include "mirrored/io/checkpoint_file.h"
#include "mirrored/io/hdf5.h"
#include "mirrored/io/jsonl_writer.h"
#include "mirrored/io/params_file.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/train/config.h"
#include "mirrored/train/evaluate.h"
#include "mirrored/train/library_options.h"
#include "mirrored/train/model_factory.h"
#include "mirrored/train/run_setup.h"

namespace mirrored::cli {
namespace po = boost::program_options;
namespace {

struct EvalArgs {
  std::string checkpoint, data, config;
  int64_t batch = 0;  // 0: the run's eval_batch_size, as the trainer evaluated
  bool json = false;
};

// The architecture is not in the parameter file; the run's resolved config.ini, written
// next to final.h5, names it.
std::string default_config_for(const std::string& checkpoint) {
  return (std::filesystem::path(checkpoint).parent_path() / "config.ini").string();
}

bool parse_eval_args(const Args& args, EvalArgs& out) {
  po::options_description desc("usage: mirrored eval --checkpoint FILE --data FILE [options]");
  desc.add_options()("help,h", "print this help")(
      "checkpoint", po::value(&out.checkpoint)->required(), "a run's final.h5, or one of its checkpoints")(
      "data", po::value(&out.data)->required(),
      "HDF5 file to score: an image set (/images, /labels), or a token file (/tokens) for a gpt")(
      "config", po::value(&out.config),
      "the run's config.ini (default: a checkpoint's own, or the one next to final.h5)")(
      "batch", po::value(&out.batch), "evaluation batch per replica (default: the run's eval_batch_size)")(
      "json", "print the result as one JSON line");
  po::variables_map values;
  if (!parse_options(args, desc, nullptr, values, "eval")) return false;
  if (values.count("batch") && out.batch < 1)
    throw InputError(str_cat("eval: --batch ", out.batch, ": expected an integer >= 1"), ExitCode::kUsage);
  out.json = values.count("json") > 0;
  if (!std::filesystem::exists(out.checkpoint))
    throw InputError(str_cat("eval: checkpoint '", out.checkpoint, "' does not exist"), ExitCode::kCheckpoint);
  return true;
}

bool is_checkpoint_file(const std::string& path) {
  io::H5File file(path, io::H5File::Access::kRead);
  return file.has_attribute("format") && file.read_string_attribute("format") == "mirrored-checkpoint";
}

// The model's configuration, and how to name where it came from: --config; else a
// checkpoint's own (the resolved INI it stores); else the config.ini that the run wrote
// next to a parameter file (final.h5).
train::TrainConfig load_model_config(const EvalArgs& options, std::string& origin) {
  if (options.config.empty() && is_checkpoint_file(options.checkpoint)) {
    origin = str_cat("the configuration stored in '", options.checkpoint, "'");
    return train::parse_config_text(io::read_checkpoint(options.checkpoint).config, origin,
                                     /*ignore_unknown_keys=*/true);
  }
  const std::string path = options.config.empty() ? default_config_for(options.checkpoint) : options.config;
  if (options.config.empty() && !std::filesystem::exists(path))
    throw InputError(str_cat("eval: no --config given and '", path,
                             "' does not exist; pass the config.ini of the run that wrote '", options.checkpoint,
                             "' (it names the model)"),
                     ExitCode::kUsage);
  origin = str_cat("'", path, "'");
  return train::parse_train_config({"--config", path});
}

// The file to score, as the trainer reads data.test for this model: the sample shape and
// classes the model is built for, and the evaluation itself.
class EvalSet {
 public:
  virtual ~EvalSet() = default;
  virtual Shape sample_shape() const = 0;
  virtual int num_classes() const = 0;
  virtual train::EvalResult evaluate(distribute::MirroredStrategy& strategy, distribute::DistributedModel& model) = 0;
};

class ImageEvalSet final : public EvalSet {
 public:
  ImageEvalSet(const std::string& path, int64_t batch, distribute::MirroredStrategy& strategy)
      : set_(train::load_dataset(path)), data_(strategy.distribute_eval_dataset(set_, batch)) {}
  Shape sample_shape() const override { return set_->sample_shape; }
  int num_classes() const override { return set_->num_classes; }
  train::EvalResult evaluate(distribute::MirroredStrategy& strategy, distribute::DistributedModel& model) override {
    return train::evaluate(strategy, model, data_);
  }

 private:
  std::shared_ptr<const data::Dataset> set_;
  distribute::EvalDataset data_;
};

// The windows the trainer scores: gpt.context tokens each, at most eval_windows of them.
class TokenEvalSet final : public EvalSet {
 public:
  TokenEvalSet(const std::string& path, int64_t batch, const train::TrainConfig& config,
               distribute::MirroredStrategy& strategy)
      : context_(config.gpt_context),
        set_(data::load_token_dataset(path, config.data_cache_mb)),
        data_(set_, batch, context_, strategy.replica_id(), strategy.num_replicas_in_sync(), strategy.device(),
              config.eval_windows) {}
  Shape sample_shape() const override { return {context_}; }
  int num_classes() const override { return static_cast<int>(set_->vocab_size()); }
  train::EvalResult evaluate(distribute::MirroredStrategy& strategy, distribute::DistributedModel& model) override {
    return train::evaluate(strategy, model, data_);
  }

 private:
  int64_t context_;
  std::shared_ptr<data::TokenDataset> set_;
  distribute::TokenEvalDataset data_;
};

// A token file for a gpt, an image set for the others; the other kind is refused by name
// before anything is read, since either reader alone would only report a missing dataset.
std::unique_ptr<EvalSet> load_eval_set(const EvalArgs& options, const train::TrainConfig& config,
                                       const std::string& config_origin, distribute::MirroredStrategy& strategy) {
  const int64_t batch = options.batch > 0 ? options.batch : config.eval_batch_size;
  const std::string model = train::option_value(config, "model");
  const bool gpt = config.model == train::ModelKind::kGpt;
  bool tokens = false;
  try {
    tokens = data::is_token_file(options.data);
  } catch (const InputError&) {  // missing or not HDF5: for an image model, the image reader says so in its terms
    if (gpt) throw;
  }
  if (gpt) {
    if (!tokens)
      throw InputError(str_cat("eval: '", options.data, "' has no ", data::kTokensDataset,
                               " dataset, but the model in ", config_origin, " is a gpt, which scores a token file (",
                               data::kTokensDataset, "; `mirrored data import-text` writes one)"),
                       ExitCode::kUsage);
    return std::make_unique<TokenEvalSet>(options.data, batch, config, strategy);
  }
  if (tokens)
    throw InputError(str_cat("eval: '", options.data, "' is a token file (", data::kTokensDataset,
                             "), but the model in ", config_origin, " is ", model,
                             ", which scores an image set (/images, /labels)"),
                     ExitCode::kUsage);
  return std::make_unique<ImageEvalSet>(options.data, batch, strategy);
}

void print_result(const EvalArgs& options, const train::EvalResult& result, int replicas) {
  const bool tokens = result.kind == train::EvalKind::kLanguageModel;
  if (options.json) {
    io::JsonRecord record = {{"kind", std::string("eval")}, {"checkpoint", options.checkpoint}, {"data", options.data}};
    train::append_eval_fields(record, result);  // the keys of the trainer's eval records
    chief_print(io::to_json(record));
    return;
  }
  char text[200];
  if (tokens)
    std::snprintf(text, sizeof(text), "val_loss %.4f  perplexity %.3f  bits/byte %.4f  (%lld windows, %d replica(s))",
                  result.loss, result.perplexity(), result.bits_per_byte(), static_cast<long long>(result.samples),
                  replicas);
  else
    std::snprintf(text, sizeof(text), "accuracy %.4f  loss %.4f  (%lld samples, %d replica(s))", result.accuracy,
                  result.loss, static_cast<long long>(result.samples), replicas);
  chief_print(text);
}

}  // namespace

int eval_command(int& argc, char**& argv, const Args& args) {
  EvalArgs options;
  if (!parse_eval_args(args, options)) return 0;
  std::string config_origin;
  const train::TrainConfig config = load_model_config(options, config_origin);
  distribute::Runtime runtime(argc, argv, {distribute::Launch::kAuto, distribute::DeviceChoice::kCpu, false});
  distribute::MirroredStrategy strategy(runtime);
  kernels::set_cpu_threads(train::threads_per_rank(config.threads, runtime.cluster()));

  const auto eval_set = load_eval_set(options, config, config_origin, strategy);
  const Shape sample_shape = eval_set->sample_shape();
  const train::ModelSpec spec = train::library_options(config).model;
  auto model = strategy.scope([&] { return train::build_model(spec, sample_shape, eval_set->num_classes()); },
                              {sample_shape, config.seed});
  // The chief reads the file and broadcasts it, as for training's initial parameters: the
  // other nodes need not see the same file system.
  auto& params = model.parameters().flat_params();
  if (strategy.is_chief()) io::load_parameters(options.checkpoint, model.parameters());
  strategy.communicator().broadcast(params.data<float>(), static_cast<size_t>(params.numel()), 0);

  print_result(options, eval_set->evaluate(strategy, model), strategy.num_replicas_in_sync());
  return 0;
}

}  // namespace mirrored::cli
