#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "mirrored/app/run_training.h"

#include "mirrored/app/preemption.h"
#include "mirrored/app/progress.h"
#include "mirrored/app/trace_signal.h"
#include "mirrored/train/checkpointer.h"
#include "mirrored/train/standard_callbacks.h"
#include "mirrored/train/tensorboard_logger.h"
#include "mirrored/train/trainer.h"

namespace mirrored::app {

train::TrainSummary run_training(const train::TrainConfig& config, distribute::Runtime& runtime,
                                 std::vector<std::unique_ptr<train::Callback>> extra) {
  using namespace train;
  // The flight recorder writes to <out>/trace; a dump left by an earlier attempt of this
  // run would mix with this one's, so each rank removes its own first.
  if (auto* watchdog = runtime.watchdog(); watchdog && config.trace_collectives > 0) {
    const std::string directory = config.out + "/trace";
    std::error_code ignored;
    std::filesystem::remove(str_cat(directory, "/rank-", runtime.rank(), ".jsonl"), ignored);
    watchdog->set_trace_directory(directory);
  }
  const TraceDumpSignal trace_signal(config.preemption_signal);
  Trainer trainer(config, runtime);
  trainer.add_callback(std::make_unique<MetricsLogger>());
  trainer.add_callback(std::make_unique<TensorBoardLogger>());
  // Before ConsoleLogger, so a finished bar ends its line before the epoch summary prints.
  trainer.add_callback(std::make_unique<ProgressReporter>(
      resolve_progress_style(config.progress, config.quiet, isatty(fileno(stderr)) == 1)));
  trainer.add_callback(std::make_unique<ConsoleLogger>());
  trainer.add_callback(std::make_unique<FinalParametersWriter>());
  trainer.add_callback(std::make_unique<Checkpointer>());  // after MetricsLogger: the eval record precedes it
  if (config.preemption_signal != PreemptionSignal::kNone)
    trainer.add_callback(std::make_unique<PreemptionHandler>(config.preemption_signal));
  for (auto& callback : extra) trainer.add_callback(std::move(callback));
  return trainer.fit();
}

}  // namespace mirrored::app
