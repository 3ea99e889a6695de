// Optimizer updates over a flat parameter buffer, one fused pass each. The formulas follow
// torch.optim.SGD and torch.optim.Adam/AdamW (foreach=False, maximize=False, amsgrad=False)
// so that runs can be compared with PyTorch step for step.
#include <cmath>

#include "cpu_kernels.h"

namespace mirrored::kernels::cpu {

void sgd_update(float* param, const float* grad, float* velocity, int64_t n, const SgdHyper& hyper) {
  const float lr = hyper.lr, momentum = hyper.momentum, wd = hyper.weight_decay;
  if (momentum == 0.0f) {
    // PyTorch keeps no buffer without momentum; v stays untouched.
    for (int64_t i = 0; i < n; ++i) param[i] -= lr * (grad[i] + wd * param[i]);
    return;
  }
  // v starts at zero, so the first step gives v = g', matching PyTorch's v = clone(g').
  if (hyper.nesterov) {
    for (int64_t i = 0; i < n; ++i) {
      const float g = grad[i] + wd * param[i];
      const float v = momentum * velocity[i] + g;
      velocity[i] = v;
      param[i] -= lr * (g + momentum * v);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const float g = grad[i] + wd * param[i];
      const float v = momentum * velocity[i] + g;
      velocity[i] = v;
      param[i] -= lr * v;
    }
  }
}

void adam_update(float* param, const float* grad, float* m, float* v, int64_t n,
                 const AdamHyper& hyper, int64_t step) {
  const float lr = hyper.lr, beta1 = hyper.beta1, beta2 = hyper.beta2, eps = hyper.eps;
  // Bias corrections in double: 1 - beta^t loses digits in float for small t.
  const double t = static_cast<double>(step);
  const double correction1 = 1.0 - std::pow(static_cast<double>(beta1), t);
  const double correction2 = 1.0 - std::pow(static_cast<double>(beta2), t);
  const float step_size = static_cast<float>(lr / correction1);
  const float sqrt_correction2 = static_cast<float>(std::sqrt(correction2));
  // Adam folds weight decay into the gradient; AdamW shrinks the parameter directly.
  const float l2 = hyper.decoupled_weight_decay ? 0.0f : hyper.weight_decay;
  const float shrink = hyper.decoupled_weight_decay ? 1.0f - lr * hyper.weight_decay : 1.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float p = param[i] * shrink;
    const float g = grad[i] + l2 * param[i];
    const float mi = beta1 * m[i] + (1.0f - beta1) * g;
    const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float denom = std::sqrt(vi) / sqrt_correction2 + eps;
    param[i] = p - step_size * mi / denom;
  }
}

}  // namespace mirrored::kernels::cpu
