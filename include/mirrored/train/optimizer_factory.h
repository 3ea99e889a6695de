#pragma once
// The optimizer named by the configuration (`optimizer`, `lr`, `momentum`, ... keys).
#include <memory>

#include "mirrored/nn/parameter_arena.h"
#include "mirrored/optim/optimizer.h"
#include "mirrored/train/config.h"

namespace mirrored::train {

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& config, nn::ParameterArena& arena);

}  // namespace mirrored::train
