#pragma once
#include "mirrored/core/tensor.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored::nn {

// Softmax cross-entropy averaged over the batch. Keeps its gradient buffer between steps.
class CrossEntropyLoss {
 public:
  struct Value {
    float mean_loss = 0.0f;
    double loss_sum = 0.0;
    int64_t correct = 0;
    int64_t count = 0;
  };
  // logits [N, C], labels int32 [N]. Computes the gradient too when `with_grad`.
  Value forward(const Tensor& logits, const Tensor& labels, bool with_grad = true);
  const Tensor& grad() const { return dlogits_; }  // d(mean loss)/d(logits)

 private:
  Tensor dlogits_;
};

}  // namespace mirrored::nn
