#pragma once
// The NaN/Inf guard of the training step (nan_policy). It looks at the gradients after
// they are averaged over replicas: every replica holds the same values then, so every
// replica takes the same decision without another collective, and a NaN on one replica
// (which averaging spreads to all) is caught everywhere.
#include <cstdint>
#include <string>

#include "mirrored/nn/parameter_arena.h"
#include "mirrored/train/config.h"

namespace mirrored::train {

class NonFiniteGuard {
 public:
  NonFiniteGuard(const TrainConfig& config, bool is_chief);
  // True when the update for step `step` (1-based) may be applied. Non-finite gradients:
  // nan_policy = stop throws Error(kNonFinite) on every rank; skip counts the step and
  // returns false, so the parameters and optimizer state stay as they were.
  bool allow_update(const nn::ParameterArena& arena, int64_t step, float local_loss);
  int64_t skipped() const { return skipped_; }

 private:
  const TrainConfig& config_;
  bool is_chief_;
  int64_t skipped_ = 0;
};

}  // namespace mirrored::train
