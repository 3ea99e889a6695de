#include "mirrored/nn/loss.h"

namespace mirrored::nn {

CrossEntropyLoss::Value CrossEntropyLoss::forward(const Tensor& logits, const Tensor& labels,
                                                  bool with_grad) {
  MIRRORED_CHECK(logits.rank() == 2, "CrossEntropyLoss expects [N, C] logits, got ",
                 shape_str(logits.shape()));
  const int64_t count = logits.dim(0);
  Tensor* grad = nullptr;
  if (with_grad) {
    ensure_shape(dlogits_, logits.shape(), DType::kF32, logits.device());
    grad = &dlogits_;
  }
  // 1/N: the gradient is that of the mean loss over this batch.
  const float grad_scale = count > 0 ? 1.0f / static_cast<float>(count) : 0.0f;
  const kernels::CrossEntropyResult r = kernels::softmax_cross_entropy(logits, labels, grad, grad_scale);
  Value value;
  value.loss_sum = r.loss_sum;
  value.correct = r.correct;
  value.count = count;
  value.mean_loss = count > 0 ? static_cast<float>(r.loss_sum / static_cast<double>(count)) : 0.0f;
  return value;
}

void CrossEntropyLoss::forward_to(const Tensor& logits, const Tensor& labels, Tensor& mean_loss) {
  MIRRORED_CHECK(logits.rank() == 2, "CrossEntropyLoss expects [N, C] logits, got ", shape_str(logits.shape()));
  const int64_t count = logits.dim(0);
  ensure_shape(dlogits_, logits.shape(), DType::kF32, logits.device());
  const float grad_scale = count > 0 ? 1.0f / static_cast<float>(count) : 0.0f;  // as forward()
  kernels::softmax_cross_entropy_mean(logits, labels, &dlogits_, grad_scale, mean_loss, workspace_);
}

}  // namespace mirrored::nn
