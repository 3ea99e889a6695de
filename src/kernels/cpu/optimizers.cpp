// Optimizer updates over a flat parameter buffer, one fused pass each; the per-element
// formulas are in kernels/optimizer_math.h, shared with the CUDA kernels. Each gradient is
// multiplied by grad_scale (the clip's factor, 1 without a clip: x * 1 is x, bit for bit)
// as it is read, so clipping costs no pass of its own over the arena.
#include "simd_dispatch.h"
#include "cpu_kernels.h"
#include "mirrored/kernels/optimizer_math.h"

namespace mirrored::kernels::cpu {

void sgd_update(float* param, const float* grad, float* velocity, int64_t n, const SgdHyper& hyper,
                float grad_scale) {
  const float lr = hyper.lr, momentum = hyper.momentum, wd = hyper.weight_decay;
  if (momentum == 0.0f) {
    for (int64_t i = 0; i < n; ++i) param[i] = sgd_plain_step(param[i], scaled_gradient(grad[i], grad_scale), lr, wd);
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    param[i] = sgd_momentum_step(param[i], scaled_gradient(grad[i], grad_scale), velocity[i], lr, momentum, wd,
                                 hyper.nesterov);
}

namespace {
// The four buffers are separate arena regions; __restrict lets the loop vectorise
// without run-time overlap checks.
MIRRORED_ALWAYS_INLINE void adam_update_simd_body(float* __restrict param, const float* __restrict grad,
                                             float* __restrict m, float* __restrict v, int64_t n,
                                             const AdamStep& s, float grad_scale) {
  for (int64_t i = 0; i < n; ++i)
    param[i] = adam_element_step(param[i], scaled_gradient(grad[i], grad_scale), m[i], v[i], s);
}
MIRRORED_SIMD_DISPATCH(adam_update_simd,
                       (float* param, const float* grad, float* m, float* v, int64_t n, const AdamStep& s,
                        float grad_scale),
                       (param, grad, m, v, n, s, grad_scale))
}  // namespace

void adam_update(float* param, const float* grad, float* m, float* v, int64_t n, const AdamHyper& hyper,
                 int64_t step, float grad_scale) {
  adam_update_simd(param, grad, m, v, n, adam_step(hyper, step), grad_scale);
}

}  // namespace mirrored::kernels::cpu
