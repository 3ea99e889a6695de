// mirrored eval --checkpoint F --data F [--config F] [--batch N] [--json]
// The trainer's evaluation of saved parameters, data-parallel: under mpirun every rank
// scores its share of the samples and the sums are reduced, exactly as the trainer
// evaluates data.test. An image model reports loss and accuracy over every sample; a gpt
// the loss over the validation windows of a token file (gpt.context, eval_windows of the
// run), its perplexity and bits per byte.
#include <boost/program_options.hpp>

#include <cstdio>
#include <iostream>

#include "commands.h"
#include "parse_options.h"
#include "mirrored/checkpoint/saved_model.h"
#include "mirrored/config/run_setup.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/distribute/strategy.h"
#include "mirrored/io/jsonl_writer.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/runtime/runtime.h"
#include "mirrored/train/evaluate.h"
#include "mirrored/train/model_data.h"

namespace mirrored::cli {
namespace po = boost::program_options;
namespace {

struct EvalArgs {
  std::string checkpoint, data, config;
  int64_t batch = 0;  // 0: the run's eval_batch_size, as the trainer evaluated
  bool json = false;
};

bool parse_eval_args(const Args& args, EvalArgs& out) {
  po::options_description desc("usage: mirrored eval --checkpoint FILE --data FILE [options]");
  desc.add_options()("help,h", "print this help")(
      "checkpoint", po::value(&out.checkpoint)->required(),
      "a run's final.h5, one of its checkpoints, its directory, or a gpt's export (model directory or .safetensors)")(
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
  return true;
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
  const checkpoint::SavedModel saved = checkpoint::find_saved_model("eval", options.checkpoint, options.config);
  runtime::Runtime runtime(argc, argv, {runtime::Launch::kAuto, runtime::DeviceChoice::kCpu, false});
  distribute::MirroredStrategy strategy(runtime);
  kernels::read_cpu_settings();
  kernels::set_cpu_threads(config::threads_per_rank(saved.lib.threads, runtime.cluster()));

  train::check_data_kind(options.data, saved.lib.model, saved.config_origin);
  const int64_t batch = options.batch > 0 ? options.batch : saved.lib.data.eval_batch_size;
  train::LoadedDatasets read_once(false);
  const auto eval_data = train::load_eval_data(saved.lib.data, options.data, batch, strategy, read_once);
  auto model = checkpoint::load_saved_model(saved, eval_data->inputs(), strategy);
  print_result(options, eval_data->evaluate(strategy, model), strategy.num_replicas_in_sync());
  return 0;
}

}  // namespace mirrored::cli
