#include "mirrored/optim/optimizer.h"

namespace mirrored::optim {

Adam::Adam(nn::ParameterArena& arena, kernels::AdamHyper hyper) : arena_(arena), hyper_(hyper) {
  MIRRORED_CHECK(arena.allocated(), "Adam needs an allocated parameter arena");
  const Tensor& params = arena.flat_params();
  m_ = Tensor(params.shape(), DType::kF32, params.device());
  v_ = Tensor(params.shape(), DType::kF32, params.device());
}

void Adam::step() {
  ++steps_;  // the first step is 1, as the bias correction expects
  kernels::adam_update(arena_.flat_params(), arena_.flat_grads(), m_, v_, hyper_, steps_, skip_flag_);
}

}  // namespace mirrored::optim
