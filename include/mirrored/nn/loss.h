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
  // Reads the loss back: on a GPU the host waits for the batch.
  Value forward(const Tensor& logits, const Tensor& labels, bool with_grad = true);
  // The training form: computes the gradient and writes the batch's mean loss into
  // `mean_loss` (f32 [1] on the logits' device) without a host wait, so a step can leave its
  // losses on the device until someone reports them. The CPU value equals forward()'s.
  void forward_to(const Tensor& logits, const Tensor& labels, Tensor& mean_loss);
  const Tensor& grad() const { return dlogits_; }  // d(mean loss)/d(logits)

 private:
  Tensor dlogits_;
  Tensor workspace_;  // forward_to's per-row scratch on a GPU
};

}  // namespace mirrored::nn
