// Optimizer updates over a flat parameter buffer, one fused pass each; the per-element
// formulas are in kernels/optimizer_math.h, shared with the CUDA kernels.
#include "cpu_kernels.h"
#include "mirrored/kernels/optimizer_math.h"

namespace mirrored::kernels::cpu {

void sgd_update(float* param, const float* grad, float* velocity, int64_t n, const SgdHyper& hyper) {
  const float lr = hyper.lr, momentum = hyper.momentum, wd = hyper.weight_decay;
  if (momentum == 0.0f) {
    for (int64_t i = 0; i < n; ++i) param[i] = sgd_plain_step(param[i], grad[i], lr, wd);
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    param[i] = sgd_momentum_step(param[i], grad[i], velocity[i], lr, momentum, wd, hyper.nesterov);
}

void adam_update(float* param, const float* grad, float* m, float* v, int64_t n, const AdamHyper& hyper,
                 int64_t step) {
  const AdamStep s = adam_step(hyper, step);
  for (int64_t i = 0; i < n; ++i) param[i] = adam_element_step(param[i], grad[i], m[i], v[i], s);
}

}  // namespace mirrored::kernels::cpu
