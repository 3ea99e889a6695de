// Checked entry points of the optimizer updates (formulas in kernels/optimizer_math.h).
#include "cpu/cpu_kernels.h"
#include "dispatch_checks.h"

namespace mirrored::kernels {
using namespace checks;

void sgd_update(Tensor& param, const Tensor& grad, Tensor& velocity, const SgdHyper& hyper) {
  const bool cuda = on_cuda("sgd_update", {&param, &grad, &velocity});
  require_f32("sgd_update", {&param, &grad, &velocity});
  require_same_shape("sgd_update", param, grad);
  require_same_shape("sgd_update", param, velocity);
  if (cuda)
    MIRRORED_ON_CUDA(param, sgd_update, param.data<float>(), grad.data<float>(), velocity.data<float>(), param.numel(),
                     hyper);
  cpu::sgd_update(param.data<float>(), grad.data<float>(), velocity.data<float>(), param.numel(), hyper);
}

void adam_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamHyper& hyper,
                 int64_t step) {
  const bool cuda = on_cuda("adam_update", {&param, &grad, &m, &v});
  require_f32("adam_update", {&param, &grad, &m, &v});
  require_same_shape("adam_update", param, grad);
  require_same_shape("adam_update", param, m);
  require_same_shape("adam_update", param, v);
  MIRRORED_CHECK(step >= 1, "adam_update: step ", step, " (steps count from 1)");
  if (cuda)
    MIRRORED_ON_CUDA(param, adam_update, param.data<float>(), grad.data<float>(), m.data<float>(), v.data<float>(),
                     param.numel(), hyper, step);
  cpu::adam_update(param.data<float>(), grad.data<float>(), m.data<float>(), v.data<float>(),
                   param.numel(), hyper, step);
}

}  // namespace mirrored::kernels
