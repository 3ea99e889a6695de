#pragma once
#include "mirrored/core/tensor.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored::nn {

// Softmax cross-entropy averaged over every scored position. Keeps its gradient buffer
// between steps. Logits [..., C] score targets [...] (the same leading dimensions): a
// classifier's [N, C] against labels [N], a language model's [B, T, V] against next tokens
// [B, T]; the leading dimensions are flattened into N = B * T rows.
class CrossEntropyLoss {
 public:
  struct Value {
    float mean_loss = 0.0f;
    double loss_sum = 0.0;
    int64_t correct = 0;
    int64_t count = 0;
  };
  // logits [..., C], targets int32 [...]. Computes the gradient too when `with_grad`.
  Value forward(const Tensor& logits, const Tensor& targets, bool with_grad = true);
  const Tensor& grad() const { return dlogits_; }  // d(mean loss)/d(logits), in the logits' shape

 private:
  Tensor dlogits_;
};

}  // namespace mirrored::nn
