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
  // Reads the loss back: on a GPU the host waits for the batch.
  Value forward(const Tensor& logits, const Tensor& targets, bool with_grad = true);
  // The training form: computes the gradient and writes the batch's mean loss into
  // `mean_loss` (f32 [1] on the logits' device) without a host wait, so a step can leave its
  // losses on the device until someone reports them. The CPU value equals forward()'s.
  // `grad_weight` multiplies the gradient (a replica's share weight; mean_loss is not
  // weighted).
  void forward_to(const Tensor& logits, const Tensor& targets, Tensor& mean_loss, float grad_weight = 1.0f);
  const Tensor& grad() const { return dlogits_; }  // d(mean loss)/d(logits), in the logits' shape

 private:
  Tensor dlogits_;
  Tensor workspace_;  // forward_to's per-row scratch on a GPU
};

}  // namespace mirrored::nn
