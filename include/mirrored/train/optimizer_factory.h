#pragma once
// The optimizer an OptimizerSpec (library_options.h) names, over a model's parameters.
#include <memory>

#include "mirrored/nn/parameter_arena.h"
#include "mirrored/optim/optimizer.h"
#include "mirrored/train/library_options.h"

namespace mirrored::train {

std::unique_ptr<optim::Optimizer> make_optimizer(const OptimizerSpec& spec, nn::ParameterArena& arena);

}  // namespace mirrored::train
