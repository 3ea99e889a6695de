#pragma once
// The optimizer named by the configuration (`optimizer`, `lr`, `momentum`, ... keys) and its
// learning-rate schedule (`lr_schedule`, `lr_warmup_epochs`, ...).
#include <memory>

#include "mirrored/nn/parameter_arena.h"
#include "mirrored/optim/lr_schedule.h"
#include "mirrored/optim/optimizer.h"
#include "mirrored/train/config.h"

namespace mirrored::train {

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& config, nn::ParameterArena& arena);

// The schedule in updates: epochs become steps_per_epoch updates each, and cosine ends with
// the last epoch. max_steps does not bend the curve, so a run stopped by it and resumed
// follows the same rates as one that never stopped.
optim::LrSchedule make_lr_schedule(const TrainConfig& config, int64_t steps_per_epoch);

}  // namespace mirrored::train
