#include "mirrored/optim/optimizer.h"

namespace mirrored::optim {

Sgd::Sgd(nn::ParameterArena& arena, kernels::SgdHyper hyper) : Sgd(arena, hyper, whole_arena(arena)) {}

Sgd::Sgd(nn::ParameterArena& arena, kernels::SgdHyper hyper, ArenaRange shard)
    : Optimizer(arena, hyper.weight_decay, shard), hyper_(hyper) {
  MIRRORED_CHECK(!hyper.nesterov || hyper.momentum > 0.0f, "Nesterov SGD needs momentum > 0");
  velocity_ = shard_state();
}

void Sgd::step() {
  ++steps_;
  for (const auto& range : ranges_) {
    kernels::SgdHyper hyper = hyper_;
    hyper.weight_decay = range.weight_decay;
    Tensor params = params_of(range), velocity = state_of(velocity_, range);
    kernels::sgd_update(params, grads_of(range), velocity, hyper, skip_flag_, grad_scale_);
  }
}

}  // namespace mirrored::optim
