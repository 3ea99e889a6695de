#pragma once
// The optimizer an OptimizerSpec (library_options.h) names, over a model's parameters.
#include <memory>

#include "mirrored/config/library_options.h"
#include "mirrored/nn/parameter_arena.h"
#include "mirrored/optim/optimizer.h"

namespace mirrored::config {

// `shard`: the part of the arena this replica updates (DistributedModel::shard());
// the default (end < 0) is the whole arena.
std::unique_ptr<optim::Optimizer> make_optimizer(const OptimizerSpec& spec, nn::ParameterArena& arena,
                                                 optim::ArenaRange shard = {0, -1});

}  // namespace mirrored::config
