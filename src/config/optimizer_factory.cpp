#include "mirrored/config/optimizer_factory.h"

namespace mirrored::config {

std::unique_ptr<optim::Optimizer> make_optimizer(const OptimizerSpec& spec, nn::ParameterArena& arena,
                                                 optim::ArenaRange shard) {
  if (shard.end < 0) shard = optim::whole_arena(arena);
  switch (spec.kind) {
    case OptimizerKind::kSgd:
      return std::make_unique<optim::Sgd>(arena, spec.sgd, shard);
    case OptimizerKind::kAdam:
    case OptimizerKind::kAdamW:
      return std::make_unique<optim::Adam>(arena, spec.adam, shard);
  }
  throw Error(ExitCode::kFailure, "unknown optimizer kind");
}

}  // namespace mirrored::config
