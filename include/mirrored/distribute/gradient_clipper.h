#pragma once
// Gradient clipping by global L2 norm (torch.nn.utils.clip_grad_norm_), applied to the
// averaged gradient after the all-reduce, so every replica scales by the same factor. It
// never waits for a GPU: the sum of squares and the factor stay on the device.
//
// With sharded optimizer state (ZeRO-1) each replica holds only its shard of the averaged
// gradient: it clips that range, and the shard plan sums the partial sums of squares over
// the replicas between the two kernels.
#include "mirrored/comm/communicator.h"
#include "mirrored/core/tensor.h"
#include "mirrored/distribute/shard_plan.h"

namespace mirrored::distribute {

class GradientClipper {
 public:
  // Scales `grads` (this replica's shard of the averaged gradient, the whole gradient
  // when unsharded) by min(1, max_norm / (norm + 1e-6)), norm = the L2 norm of the whole
  // gradient. `comm` is the communicator the plan's shards live on. max_norm > 0.
  void clip(Tensor& grads, float max_norm, const ShardPlan& plan, comm::Communicator& comm);
  // `grads` is the whole gradient (one replica, or an unsharded one).
  void clip(Tensor& grads, float max_norm);
  // The factor clip() would scale `grads` by, leaving them as they are (f32 [1] beside
  // them), for an optimizer that applies it as it reads each gradient
  // (Optimizer::scale_gradients_by): one pass over the arena instead of two, same bits.
  const Tensor& factor(const Tensor& grads, float max_norm, const ShardPlan& plan, comm::Communicator& comm);
  const Tensor& factor(const Tensor& grads, float max_norm);
  // The norm before the last clip, f32 [1] on the gradient's device (undefined before the
  // first clip); reading it waits for a GPU.
  const Tensor& norm() const { return norm_; }

 private:
  void sum_squares(const Tensor& grads, float max_norm);
  Tensor sum_squares_, norm_, factor_, workspace_;
};

}  // namespace mirrored::distribute
