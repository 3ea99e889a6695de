#pragma once
// The op set. Every op takes Tensors and runs on the device they live on: the CPU
// implementation is in src/kernels/cpu/, the CUDA one (same header) in src/kernels/cuda/.
// Shapes are checked here, once, in the dispatching layer (src/kernels/dispatch.cpp).
//
// Conventions: row-major; activations are [batch, features] for dense ops; "accumulate"
// ops add into their output (parameter gradients accumulate until zeroed, which is what
// gradient accumulation over micro-batches needs).
#include <cstdint>

#include "mirrored/core/tensor.h"

namespace mirrored::kernels {

// c = alpha * op(a) @ op(b) + beta * c, where op transposes when asked. 2-D tensors.
void gemm(bool transpose_a, bool transpose_b, float alpha, const Tensor& a, const Tensor& b, float beta,
          Tensor& c);

// y[n, f] += bias[f]
void add_bias(Tensor& y, const Tensor& bias);
// dbias[f] += sum_n dy[n, f]
void accumulate_bias_grad(const Tensor& dy, Tensor& dbias);

// y = max(x, 0); dx = dy where y > 0 else 0 (y is the forward output). May run in place.
void relu_forward(const Tensor& x, Tensor& y);
void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx);

// Mean softmax cross-entropy over the rows of `logits` [N, C] with int32 `labels` [N].
// Returns the summed (not averaged) loss and the count of rows whose arg-max is the label;
// when `dlogits` is given it receives (softmax - onehot) * grad_scale.
struct CrossEntropyResult {
  double loss_sum = 0.0;
  int64_t correct = 0;
};
CrossEntropyResult softmax_cross_entropy(const Tensor& logits, const Tensor& labels, Tensor* dlogits,
                                         float grad_scale);

// x *= alpha
void scale(Tensor& x, float alpha);
// y += alpha * x
void axpy(float alpha, const Tensor& x, Tensor& y);
// dst = src (same shape; any devices)
void copy(const Tensor& src, Tensor& dst);
// True when every element is finite.
bool all_finite(const Tensor& x);

// SGD with momentum and L2 weight decay, PyTorch semantics:
//   g' = g + weight_decay * p;  v = momentum * v + g';  p -= lr * (nesterov ? g' + momentum * v : v)
struct SgdHyper {
  float lr = 0.01f;
  float momentum = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;
};
void sgd_update(Tensor& param, const Tensor& grad, Tensor& velocity, const SgdHyper& hyper);

// Adam / AdamW, PyTorch semantics. `step` counts from 1 (bias correction).
// decoupled_weight_decay=false: g' = g + wd * p (Adam). true: p *= 1 - lr * wd first (AdamW).
struct AdamHyper {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  bool decoupled_weight_decay = false;
};
void adam_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamHyper& hyper,
                 int64_t step);

// Sets the number of threads the CPU kernels (and BLAS) use in this process.
void set_cpu_threads(int threads);
int cpu_threads();

}  // namespace mirrored::kernels
