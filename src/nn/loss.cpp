#include "mirrored/nn/loss.h"

#include <algorithm>

namespace mirrored::nn {
namespace {

// The rows the kernels see: logits [..., C] as [count, C], targets [...] as [count].
int64_t row_count(const Tensor& logits, const Tensor& targets) {
  const Shape& shape = logits.shape();
  MIRRORED_CHECK(logits.rank() >= 2 && Shape(shape.begin(), shape.end() - 1) == targets.shape(),
                 "CrossEntropyLoss expects logits [..., C] and targets [...] with the same leading dimensions, got ",
                 shape_str(shape), " and ", shape_str(targets.shape()));
  return logits.numel() / std::max<int64_t>(shape.back(), 1);
}

}  // namespace

CrossEntropyLoss::Value CrossEntropyLoss::forward(const Tensor& logits, const Tensor& targets,
                                                  bool with_grad) {
  const Shape& shape = logits.shape();
  const int64_t classes = shape.back();
  const int64_t count = row_count(logits, targets);
  // The kernel sees rows: [N, C] views of the same storage.
  const Tensor rows = logits.reshape({count, classes});
  const Tensor row_targets = targets.reshape({count});
  Tensor grad_rows;
  Tensor* grad = nullptr;
  if (with_grad) {
    ensure_shape(dlogits_, shape, DType::kF32, logits.device());
    grad_rows = dlogits_.reshape({count, classes});
    grad = &grad_rows;
  }
  // 1/N: the gradient is that of the mean loss over this batch.
  const float grad_scale = count > 0 ? 1.0f / static_cast<float>(count) : 0.0f;
  const kernels::CrossEntropyResult r = kernels::softmax_cross_entropy(rows, row_targets, grad, grad_scale);
  Value value;
  value.loss_sum = r.loss_sum;
  value.correct = r.correct;
  value.count = count;
  value.mean_loss = count > 0 ? static_cast<float>(r.loss_sum / static_cast<double>(count)) : 0.0f;
  return value;
}

void CrossEntropyLoss::forward_to(const Tensor& logits, const Tensor& targets, Tensor& mean_loss,
                                  float grad_weight) {
  const Shape& shape = logits.shape();
  const int64_t classes = shape.back();
  const int64_t count = row_count(logits, targets);
  ensure_shape(dlogits_, shape, DType::kF32, logits.device());
  Tensor grad_rows = dlogits_.reshape({count, classes});
  // As forward() when unweighted (a weight of exactly 1 leaves the bits alone).
  float grad_scale = count > 0 ? 1.0f / static_cast<float>(count) : 0.0f;
  if (grad_weight != 1.0f) grad_scale = static_cast<float>(static_cast<double>(grad_weight) / static_cast<double>(count));
  kernels::softmax_cross_entropy_mean(logits.reshape({count, classes}), targets.reshape({count}), &grad_rows,
                                      grad_scale, mean_loss, workspace_);
}

}  // namespace mirrored::nn
