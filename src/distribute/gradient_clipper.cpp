#include "mirrored/distribute/gradient_clipper.h"

#include "mirrored/core/error.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored::distribute {

void GradientClipper::sum_squares(const Tensor& grads, float max_norm) {
  MIRRORED_CHECK(max_norm > 0.0f, "grad_clip ", max_norm, " must be > 0");
  if (!sum_squares_.defined() || sum_squares_.device() != grads.device()) {
    sum_squares_ = Tensor({1}, DType::kF32, grads.device());
    norm_ = Tensor({1}, DType::kF32, grads.device());
    factor_ = Tensor({1}, DType::kF32, grads.device());
  }
  kernels::sum_squares(grads, sum_squares_, workspace_);
}

void GradientClipper::clip(Tensor& grads, float max_norm, const ShardPlan& plan, comm::Communicator& comm) {
  sum_squares(grads, max_norm);
  plan.sum_over_shards(sum_squares_, comm);
  kernels::scale_by_clip(grads, sum_squares_, max_norm, norm_);
}

void GradientClipper::clip(Tensor& grads, float max_norm) {
  sum_squares(grads, max_norm);
  kernels::scale_by_clip(grads, sum_squares_, max_norm, norm_);
}

const Tensor& GradientClipper::factor(const Tensor& grads, float max_norm, const ShardPlan& plan,
                                      comm::Communicator& comm) {
  sum_squares(grads, max_norm);
  plan.sum_over_shards(sum_squares_, comm);
  kernels::clip_factor(sum_squares_, max_norm, norm_, factor_);
  return factor_;
}

const Tensor& GradientClipper::factor(const Tensor& grads, float max_norm) {
  sum_squares(grads, max_norm);
  kernels::clip_factor(sum_squares_, max_norm, norm_, factor_);
  return factor_;
}

}  // namespace mirrored::distribute
