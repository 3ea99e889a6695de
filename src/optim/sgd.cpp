#include "mirrored/optim/optimizer.h"

namespace mirrored::optim {

Sgd::Sgd(nn::ParameterArena& arena, kernels::SgdHyper hyper) : arena_(arena), hyper_(hyper) {
  MIRRORED_CHECK(arena.allocated(), "Sgd needs an allocated parameter arena");
  MIRRORED_CHECK(!hyper.nesterov || hyper.momentum > 0.0f, "Nesterov SGD needs momentum > 0");
  velocity_ = Tensor(arena.flat_params().shape(), DType::kF32, arena.flat_params().device());
}

void Sgd::step() {
  ++steps_;
  kernels::sgd_update(arena_.flat_params(), arena_.flat_grads(), velocity_, hyper_, skip_flag_);
}

}  // namespace mirrored::optim
