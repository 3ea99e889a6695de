#include "mirrored/train/optimizer_factory.h"

namespace mirrored::train {

std::unique_ptr<optim::Optimizer> make_optimizer(const OptimizerSpec& spec, nn::ParameterArena& arena) {
  switch (spec.kind) {
    case OptimizerKind::kSgd:
      return std::make_unique<optim::Sgd>(arena, spec.sgd);
    case OptimizerKind::kAdam:
    case OptimizerKind::kAdamW:
      return std::make_unique<optim::Adam>(arena, spec.adam);
  }
  throw Error(ExitCode::kFailure, "unknown optimizer kind");
}

}  // namespace mirrored::train
