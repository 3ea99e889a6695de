#include "mirrored/optim/optimizer.h"

namespace mirrored::optim {

Adam::Adam(nn::ParameterArena& arena, kernels::AdamHyper hyper) : Adam(arena, hyper, whole_arena(arena)) {}

Adam::Adam(nn::ParameterArena& arena, kernels::AdamHyper hyper, ArenaRange shard)
    : Optimizer(arena, hyper.weight_decay, shard), hyper_(hyper) {
  m_ = shard_state();
  v_ = shard_state();
}

void Adam::step() {
  ++steps_;  // the first step is 1, as the bias correction expects
  for (const auto& range : ranges_) {
    kernels::AdamHyper hyper = hyper_;
    hyper.weight_decay = range.weight_decay;
    Tensor params = params_of(range), m = state_of(m_, range), v = state_of(v_, range);
    kernels::adam_update(params, grads_of(range), m, v, hyper, steps_, skip_flag_, grad_scale_);
  }
}

}  // namespace mirrored::optim
