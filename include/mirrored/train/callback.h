#pragma once
// Callbacks observe the training loop (Keras-style): metrics files, console output,
// checkpoints and guards plug in here instead of growing the loop itself.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mirrored/config/config.h"
#include "mirrored/distribute/strategy.h"
#include "mirrored/optim/optimizer.h"
#include "mirrored/train/evaluate.h"
#include "mirrored/train/step_losses.h"
#include "mirrored/train/straggler.h"
#include "mirrored/train/train_step.h"

namespace mirrored::checkpoint {
class CheckpointWriter;
class RunDirectory;
}  // namespace mirrored::checkpoint

namespace mirrored::train {

class NonFiniteGuard;

// What every callback may look at (and, through `stop_training`, end the run).
struct TrainContext {
  const config::TrainConfig& config;
  distribute::MirroredStrategy& strategy;
  distribute::DistributedModel& model;
  optim::Optimizer& optimizer;
  checkpoint::RunDirectory& run_dir;
  int64_t steps_per_epoch = 0;
  int64_t total_steps = 0;
  bool stop_training = false;
  // Set with stop_training when the run must end at once (preemption): no evaluation, no
  // final files; the command exits with ExitCode::kPreempted.
  bool preempted = false;
  // With `preempted`, when it was Ctrl-C: the command exits with ExitCode::kInterrupted.
  bool interrupted = false;
  // With `preempted`, when a shrunk job asked to grow back (train/preemption.h): the command
  // exits with ExitCode::kResizeRequested.
  bool resize_requested = false;
  // The NaN/Inf guard and the step losses it names in its messages (set by the Trainer):
  // whatever saves the training state settles the guard first (settle_guard()), so a
  // checkpoint never holds a step whose update the guard has skipped without the host
  // knowing.
  NonFiniteGuard* guard = nullptr;
  StepLosses* losses = nullptr;
  // The run's one checkpoint writer (checkpoint/checkpoint_writer.h): every callback that
  // saves the training state writes through it. Set by the Trainer. A background write may
  // still be reading the parameters and optimizer state in place until the next update
  // (checkpoint/device_snapshot.h): a callback that changes them between steps calls
  // `checkpoints->device_snapshot().guard_overwrites()` first, as the update does.
  checkpoint::CheckpointWriter* checkpoints = nullptr;
  // Events other callbacks hand to TensorBoard (the owner of membership's: a rank replaced
  // by a spare, which leaves train/world_size as it was): TensorBoardLogger writes them at
  // the next log point, at that point's step, and clears them.
  std::vector<std::pair<std::string, float>> pending_scalars{};
  // Sharded state under on_failure = shrink: the shard copies the Trainer keeps (for their
  // cost in the step, which `bench train` reports). Null otherwise. Set by the Trainer.
  const distribute::ShardCopies* shard_copies = nullptr;
};

struct StepEnd {
  int64_t step = 0;            // steps completed in the run, this one included
  int64_t epoch = 0;           // 0-based
  int64_t step_in_epoch = 0;   // 0-based index of this step within its epoch
  // This replica's losses of the epoch so far, left on the device: losses->loss(step_in_epoch)
  // is this step's (not reduced). Reading waits for the GPU: read only where it is shown.
  StepLosses* losses = nullptr;
  double seconds = 0.0;        // this step's wall time on this rank
};

// Every `log_every` steps and at the end of each epoch: values reduced over replicas.
struct LogPoint {
  int64_t step = 0;
  int64_t epoch = 0;
  double loss = 0.0;             // mean over replicas and the steps since the last point
  double lr = 0.0;
  double samples_per_sec = 0.0;  // global samples over the interval's wall time
  std::optional<double> tokens_per_sec;  // token models: global tokens over the interval's wall time
  double comm_ms = 0.0;          // gradient all-reduce time per step (this rank)
  double exposed_comm_ms = 0.0;  // the part of it after backward ended (<= comm_ms)
  int64_t world_size = 1;        // replicas in the step (fewer after a shrink)
  // grad_clip > 0: the L2 norm of the averaged gradient of the point's step, before clipping.
  std::optional<double> grad_norm;
  // Several replicas: every rank's straggler scores per phase at this point (straggler.h),
  // and the ranks that have stayed below straggler.threshold for straggler.window points.
  // Empty in a world of one, and at a point whose interval held only step 0.
  std::vector<PhaseSeconds> rank_scores;
  std::vector<StragglerFlag> stragglers;
};

struct EpochEnd {
  int64_t step = 0;
  int64_t epoch = 0;
  double train_loss = 0.0;        // mean over the epoch's steps and replicas
  double seconds = 0.0;           // training time of the epoch (evaluation excluded)
  double samples_per_sec = 0.0;
  EvalResult eval;                // the latest evaluation (this epoch end's when eval_every = 0)
};

// After each evaluation of the test (validation) set: at epoch ends, or every eval_every steps.
struct EvalPoint {
  int64_t step = 0;
  int64_t epoch = 0;
  EvalResult eval;
};

struct TrainSummary {
  int64_t steps = 0;
  double final_test_loss = 0.0;
  double final_test_accuracy = 0.0;
  EvalResult final_eval;          // the last evaluation (loss and accuracy above repeat it)
  double samples_per_sec = 0.0;   // all replicas, step 0 of the run excluded
  bool preempted = false;         // stopped early after a preemption checkpoint
  bool interrupted = false;       // ... written on Ctrl-C (train/preemption.h)
  bool resize_requested = false;  // ... written for a relaunch at full size (elastic/grow_back.h)
  bool finished = false;          // resume = auto found the run already complete; nothing ran
  // on_failure = shrink: too few replicas survived to go on; the checkpoint of the last
  // completed step is written and the command exits with ExitCode::kTooFewReplicas.
  bool too_few_replicas = false;
};

class Callback {
 public:
  virtual ~Callback() = default;
  virtual void on_train_begin(TrainContext&) {}
  // `step`: the steps completed before this one.
  virtual void on_step_begin(TrainContext&, int64_t /*step*/) {}
  // As each phase of the step ends (train_step.h), on the thread that runs the step.
  virtual void on_phase_end(TrainContext&, StepPhase) {}
  virtual void on_step_end(TrainContext&, const StepEnd&) {}
  virtual void on_log(TrainContext&, const LogPoint&) {}
  virtual void on_evaluate(TrainContext&, const EvalPoint&) {}  // before the epoch's on_epoch_end
  virtual void on_epoch_end(TrainContext&, const EpochEnd&) {}
  virtual void on_train_end(TrainContext&, const TrainSummary&) {}
};

}  // namespace mirrored::train
