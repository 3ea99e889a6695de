#include "mirrored/distribute/gradient_clipper.h"

#include "mirrored/core/error.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored::distribute {

void GradientClipper::clip(Tensor& grads, float max_norm, comm::Communicator* shards) {
  MIRRORED_CHECK(max_norm > 0.0f, "grad_clip ", max_norm, " must be > 0");
  if (!sum_squares_.defined() || sum_squares_.device() != grads.device()) {
    sum_squares_ = Tensor({1}, DType::kF32, grads.device());
    norm_ = Tensor({1}, DType::kF32, grads.device());
  }
  kernels::sum_squares(grads, sum_squares_, workspace_);
  if (shards != nullptr && shards->size() > 1) {
    MIRRORED_CHECK(grads.device().is_cpu() || shards->backend() == "nccl", "gradient clipping over shards on ",
                   grads.device().str(), " needs the device communicator, not '", shards->backend(), "'");
    shards->allreduce(sum_squares_.data<float>(), 1, comm::ReduceOp::kSum);
  }
  kernels::scale_by_clip(grads, sum_squares_, max_norm, norm_);
}

}  // namespace mirrored::distribute
