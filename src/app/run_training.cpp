#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <optional>

#include "mirrored/app/run_training.h"

#include "mirrored/comm/failure/fault_tolerance.h"
#include "mirrored/comm/health/trace_signal.h"
#include "mirrored/core/log.h"
#include "mirrored/elastic/shrink_recovery.h"
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
  using namespace train;
  const bool shrink = config.on_failure == config::OnFailure::kShrink;
  config::TrainConfig current = config;
  std::optional<elastic::Recovery> recovered;
  Stopwatch since_failure;
  const comm::TraceDumpSignal trace_signal(config.preemption_signal == config::PreemptionSignal::kUsr2);
  // on_failure = shrink: each lost rank ends one Trainer; the survivors recover (elastic/shrink_recovery.h)
  // and the next Trainer goes on from the recovered step. Otherwise the first failure ends the job.
  for (;;) {
    std::optional<StateAfterFailure> snapshot;
    try {
      arm_trace_dumps(runtime, current);
      Trainer trainer(current, runtime);
      add_standard_callbacks(trainer, current);
      if (recovered) trainer.add_callback(std::make_unique<elastic::MembershipReporter>(*recovered, since_failure));
      for (auto& callback : extra) trainer.add_callback(std::move(callback));
      extra.clear();
      try {
        return trainer.fit();
      } catch (const comm::PeerFailure& failure) {
        if (!shrink) throw;
        since_failure.reset();
        rank_warning(str_cat("a peer failed: ", failure.what()));
        snapshot = trainer.state_after_failure();
      }
    } catch (const comm::PeerFailure& failure) {  // while a Trainer was being built or torn down
      if (!shrink) throw;
      if (!snapshot) {
        since_failure.reset();
        rank_warning(str_cat("a peer failed: ", failure.what()));
      }
    }
    try {
      // A peer lost during the recovery itself: shrink again and start the recovery over.
      for (;;) {
        try {
          recovered = elastic::recover_after_failure(current, runtime, snapshot);
          break;
        } catch (const comm::PeerFailure& failure) {
          rank_warning(str_cat("a peer failed during the recovery: ", failure.what()));
        }
      }
    } catch (const Error& error) {
      if (error.code() != ExitCode::kTooFewReplicas) throw;
      // Every survivor ends alike and on its own (no MPI_Abort), so nothing outlives the job.
      if (runtime.rank() == 0) rank_error(error.what());
      TrainSummary summary;
      summary.steps = recovered ? recovered->step : 0;
      summary.too_few_replicas = true;
      return summary;
    }
    current.uneven_batch_shares = true;  // the global batch stays; the survivors may split it unevenly
    if (!recovered->checkpoint.empty()) {
      current.resume = config::ResumeMode::kPath;
      current.resume_path = recovered->checkpoint;
    } else {
      current.resume = config::ResumeMode::kAuto;
    }
  }
}

}  // namespace mirrored::app
