#pragma once
// The optimizer updates, written once: per-element inline functions that the CPU loops
// (kernels/cpu/optimizers.cpp) and the CUDA kernels (kernels/cuda/optimizers.cu) both call,
// so the two devices run the same float operations in the same order. The formulas follow
// torch.optim.SGD and torch.optim.Adam/AdamW (foreach=False, maximize=False, amsgrad=False)
// so that runs can be compared with PyTorch step for step.
#include <cmath>
#include <cstdint>

#include "mirrored/core/host_device.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored::kernels {

// SGD without momentum: PyTorch keeps no buffer then, so there is no velocity.
MIRRORED_HOST_DEVICE inline float sgd_plain_step(float param, float grad, float lr, float weight_decay) {
  return param - lr * (grad + weight_decay * param);
}

// SGD with momentum. v starts at zero, so the first step gives v = g', matching PyTorch's
// v = clone(g'). Updates `velocity` and returns the new parameter.
MIRRORED_HOST_DEVICE inline float sgd_momentum_step(float param, float grad, float& velocity, float lr,
                                                    float momentum, float weight_decay, bool nesterov) {
  const float g = grad + weight_decay * param;
  const float v = momentum * velocity + g;
  velocity = v;
  return param - lr * (nesterov ? g + momentum * v : v);
}

// What one Adam step shares across elements, computed once on the host.
struct AdamStep {
  float beta1, beta2, eps;
  float l2;                // folded into the gradient (Adam); 0 for AdamW
  float shrink;            // parameter multiplier (AdamW: 1 - lr * wd); 1 for Adam
  float step_size;         // lr / (1 - beta1^t)
  float sqrt_correction2;  // sqrt(1 - beta2^t)
};

inline AdamStep adam_step(const AdamHyper& hyper, int64_t step) {
  // Bias corrections in double: 1 - beta^t loses digits in float for small t.
  const double t = static_cast<double>(step);
  const double correction1 = 1.0 - std::pow(static_cast<double>(hyper.beta1), t);
  const double correction2 = 1.0 - std::pow(static_cast<double>(hyper.beta2), t);
  AdamStep s{};
  s.beta1 = hyper.beta1;
  s.beta2 = hyper.beta2;
  s.eps = hyper.eps;
  s.l2 = hyper.decoupled_weight_decay ? 0.0f : hyper.weight_decay;
  s.shrink = hyper.decoupled_weight_decay ? 1.0f - hyper.lr * hyper.weight_decay : 1.0f;
  s.step_size = static_cast<float>(hyper.lr / correction1);
  s.sqrt_correction2 = static_cast<float>(std::sqrt(correction2));
  return s;
}

// A gradient times the clip's factor (clip_math.h), rounded to float on its own before an
// update uses it: the bits of scaling the whole gradient first and updating after, in one
// pass over the arena instead of two. The files that call it build without contraction
// (-ffp-contract=off, nvcc -fmad=false; src/CMakeLists.txt), so the product is never fused
// into the update's first add.
MIRRORED_HOST_DEVICE inline float scaled_gradient(float grad, float scale) { return grad * scale; }

// One element of Adam/AdamW: updates the moments `m` and `v` and returns the new parameter.
MIRRORED_HOST_DEVICE inline float adam_element_step(float param, float grad, float& m, float& v, const AdamStep& s) {
  const float p = param * s.shrink;
  const float g = grad + s.l2 * param;
  const float mi = s.beta1 * m + (1.0f - s.beta1) * g;
  const float vi = s.beta2 * v + (1.0f - s.beta2) * g * g;
  m = mi;
  v = vi;
  const float denom = sqrtf(vi) / s.sqrt_correction2 + s.eps;
  return p - s.step_size * mi / denom;
}

}  // namespace mirrored::kernels
