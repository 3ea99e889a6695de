#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "mirrored/app/run_training.h"

#include "mirrored/checkpoint/checkpoint_writer.h"
#include "mirrored/comm/health/trace_signal.h"
#include "mirrored/elastic/elastic_run.h"
#include "mirrored/train/checkpointer.h"
#include "mirrored/train/preemption.h"
#include "mirrored/train/progress.h"
#include "mirrored/train/standard_callbacks.h"
#include "mirrored/train/tensorboard_logger.h"
#include "mirrored/train/trainer.h"

namespace mirrored::app {
namespace {

void add_standard_callbacks(train::Trainer& trainer, const config::TrainConfig& config) {
  using namespace train;
  trainer.add_callback(std::make_unique<MetricsLogger>());
  trainer.add_callback(std::make_unique<TensorBoardLogger>());
  // Before ConsoleLogger, so a finished bar ends its line before the epoch summary prints.
  trainer.add_callback(std::make_unique<train::ProgressReporter>(
      train::resolve_progress_style(config.progress, config.quiet, isatty(fileno(stderr)) == 1)));
  trainer.add_callback(std::make_unique<ConsoleLogger>());
  trainer.add_callback(std::make_unique<FinalParametersWriter>());
  trainer.add_callback(std::make_unique<Checkpointer>());  // after MetricsLogger: the eval record precedes it
  // Always: Ctrl-C checkpoints and stops too (preemption_signal = none installs no other).
  trainer.add_callback(std::make_unique<train::PreemptionHandler>(config.preemption_signal));
}

// The flight recorder writes to <out>/trace; a dump left by an earlier attempt of this run
// would mix with this one's, so each rank removes its own first. Again after a shrink: the
// survivors' watchdog is a new one, and ranks are numbered anew.
void arm_trace_dumps(runtime::Runtime& runtime, const config::TrainConfig& config) {
  auto* watchdog = runtime.watchdog();
  if (!watchdog || config.trace_collectives <= 0) return;
  const std::string directory = config.out + "/trace";
  std::error_code ignored;
  std::filesystem::remove(str_cat(directory, "/rank-", runtime.rank(), ".jsonl"), ignored);
  watchdog->set_trace_directory(directory);
}

}  // namespace

train::TrainSummary run_training(const config::TrainConfig& config, runtime::Runtime& runtime,
                                 std::vector<std::unique_ptr<train::Callback>> extra) {
  const comm::TraceDumpSignal trace_signal(config.preemption_signal == config::PreemptionSignal::kUsr2);
  // One writer for the whole run: every Trainer's checkpoints and the recovery's go through it.
  checkpoint::CheckpointWriter checkpoints(config);
  // Under on_failure = shrink the data sets one Trainer read serve the next: a recovery
  // then reads no file again (train/loaded_datasets.h).
  train::LoadedDatasets datasets(config.on_failure == config::OnFailure::kShrink);
  // Each Trainer (a new one after each recovery from a lost rank) gets the standard
  // callbacks; the first also gets `extra`.
  const elastic::TrainerFactory make_trainer = [&](const config::TrainConfig& current) {
    arm_trace_dumps(runtime, current);
    train::TrainerOptions options;
    options.checkpoints = &checkpoints;
    options.datasets = &datasets;
    auto trainer = std::make_unique<train::Trainer>(current, runtime, options);
    add_standard_callbacks(*trainer, current);
    for (auto& callback : extra) trainer->add_callback(std::move(callback));
    extra.clear();
    return trainer;
  };
  return elastic::ElasticRun(config, runtime, checkpoints, datasets).run(make_trainer);
}

}  // namespace mirrored::app
