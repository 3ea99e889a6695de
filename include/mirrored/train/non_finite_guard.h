#pragma once
// The NaN/Inf guard of the training step (nan_policy). It looks at the gradients after
// they are averaged over replicas: every replica holds the same values then, so every
// replica takes the same decision without another collective, and a NaN on one replica
// (which averaging spreads to all) is caught everywhere.
//
// Without a host wait: flag() tests the gradients on their device into a flag that the
// optimizer update reads (a flagged update leaves parameters and optimizer state as they
// were) and tallies the flagged steps there. settle() reads the tally and applies the
// policy. On a CPU reading costs nothing and train_step settles every step. On a GPU the
// Trainer settles at log points and before any checkpoint is written:
// - skip: the same updates are skipped, counted and reported, a few steps later. One
//   difference: Adam's bias correction counts a skipped step until the settle corrects the
//   optimizer's step count (steps_ of the optimizer are corrected then).
// - stop: the flag latches, so no update after the bad one applies; the run ends at the
//   settle with the same message (the bad step's number and loss), the same parameters and
//   the same last good checkpoint as an immediate stop; only the steps in between are
//   computed for nothing.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "mirrored/config/config.h"
#include "mirrored/core/tensor.h"
#include "mirrored/distribute/distributed_model.h"
#include "mirrored/optim/optimizer.h"
#include "mirrored/train/step_losses.h"

namespace mirrored::train {

class NonFiniteGuard {
 public:
  // This replica's loss of a (1-based) step, for messages; nothing when it is no longer known.
  using LossOf = std::function<std::optional<float>(int64_t step)>;

  NonFiniteGuard(const config::TrainConfig& config, bool is_chief);
  // Before the optimizer step of update `step` (1-based): flags non-finite averaged
  // gradients of `model` (agreed over shards) on their device and makes `optimizer` skip
  // the update when they are. No host wait.
  void flag(distribute::DistributedModel& model, optim::Optimizer& optimizer, int64_t step);
  // True where reading the flag costs no wait (the gradients live on the CPU).
  bool settles_every_step() const { return every_step_; }
  // Reads what flag() recorded since the last settle and applies nan_policy: stop throws
  // Error(kNonFinite) on every rank; skip counts and reports the skipped steps. Corrects the
  // optimizer's step count for skipped updates. A no-op before the first flag().
  void settle(optim::Optimizer& optimizer, const LossOf& local_loss);
  int64_t skipped() const { return skipped_; }

 private:
  const config::TrainConfig& config_;
  bool is_chief_;
  bool every_step_ = false;
  int64_t skipped_ = 0;
  int64_t last_flagged_step_ = 0;  // the step of the latest flag() call
  Tensor flag_;   // int32 [1]: this step's gradients are not finite
  Tensor tally_;  // int32 [2]: flagged steps, first flagged step, since the last settle
};

// Settles `guard` (NonFiniteGuard::settle), naming the first bad step's loss when
// `losses` still holds it: they hold the epoch whose first step is `epoch_start` + 1.
void settle_guard(NonFiniteGuard& guard, optim::Optimizer& optimizer, StepLosses& losses, int64_t epoch_start,
                  int64_t steps_per_epoch);

}  // namespace mirrored::train
