// mirrored eval --checkpoint F --data F [--config F] [--batch N] [--json]
// Accuracy and loss of saved parameters, data-parallel: under mpirun every rank scores its
// share of the samples and the sums are reduced, exactly as the trainer evaluates.
#include <boost/program_options.hpp>

#include <filesystem>
#include <iostream>

#include "commands.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/distribute/runtime.h"
#include "mirrored/distribute/strategy.h"
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
  int64_t batch = 1000;
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
      "checkpoint", po::value(&out.checkpoint)->required(), "parameter file (a run's final.h5)")(
      "data", po::value(&out.data)->required(), "HDF5 dataset to score (/images, /labels)")(
      "config", po::value(&out.config), "the run's config.ini, for the model (default: next to the checkpoint)")(
      "batch", po::value(&out.batch)->default_value(1000), "evaluation batch per replica")(
      "json", "print the result as one JSON line");
  po::variables_map values;
  try {
    po::store(po::command_line_parser(args).options(desc).run(), values);
    if (values.count("help")) {
      std::cout << desc << "\n";
      return false;
    }
    po::notify(values);
  } catch (const po::error& e) {
    throw InputError(str_cat("eval: ", e.what(), " (mirrored eval --help)"), ExitCode::kUsage);
  }
  if (out.batch < 1) throw InputError(str_cat("eval: --batch ", out.batch, ": expected an integer >= 1"), ExitCode::kUsage);
  out.json = values.count("json") > 0;
  if (out.config.empty()) {
    out.config = default_config_for(out.checkpoint);
    if (!std::filesystem::exists(out.config))
      throw InputError(str_cat("eval: no --config given and '", out.config,
                               "' does not exist; pass the config.ini of the run that wrote '", out.checkpoint,
                               "' (it names the model)"),
                       ExitCode::kUsage);
  }
  if (!std::filesystem::exists(out.checkpoint))
    throw InputError(str_cat("eval: checkpoint '", out.checkpoint, "' does not exist"), ExitCode::kCheckpoint);
  return true;
}

}  // namespace

int eval_command(int& argc, char**& argv, const Args& args) {
  EvalArgs options;
  if (!parse_eval_args(args, options)) return 0;
  const train::TrainConfig config = train::parse_train_config({"--config", options.config});
  distribute::Runtime runtime(argc, argv, {distribute::Launch::kAuto, distribute::DeviceChoice::kCpu, false});
  distribute::MirroredStrategy strategy(runtime);
  kernels::set_cpu_threads(train::threads_per_rank(config.threads, runtime.cluster()));

  const auto dataset = train::load_dataset(options.data);
  const train::ModelSpec spec = train::library_options(config).model;
  auto model = strategy.scope([&] { return train::build_model(spec, dataset->sample_shape, dataset->num_classes); },
                              {dataset->sample_shape, config.seed});
  // The chief reads the file and broadcasts it, as for training's initial parameters: the
  // other nodes need not see the same file system.
  auto& params = model.parameters().flat_params();
  if (strategy.is_chief()) io::load_parameters(options.checkpoint, model.parameters());
  strategy.communicator().broadcast(params.data<float>(), static_cast<size_t>(params.numel()), 0);

  auto eval_data = strategy.distribute_eval_dataset(dataset, options.batch);
  const train::EvalResult result = train::evaluate(strategy, model, eval_data);
  if (options.json) {
    chief_print(io::to_json({{"kind", std::string("eval")},
                             {"checkpoint", options.checkpoint},
                             {"data", options.data},
                             {"test_loss", result.loss},
                             {"test_accuracy", result.accuracy},
                             {"test_samples", result.samples}}));
  } else {
    char text[160];
    std::snprintf(text, sizeof(text), "accuracy %.4f  loss %.4f  (%lld samples, %d replica(s))", result.accuracy,
                  result.loss, static_cast<long long>(result.samples), strategy.num_replicas_in_sync());
    chief_print(text);
  }
  return 0;
}

}  // namespace mirrored::cli
