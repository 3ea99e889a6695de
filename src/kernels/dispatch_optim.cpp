// Checked entry points of the optimizer updates (formulas in kernels/optimizer_math.h).
#include "cpu/cpu_kernels.h"
#include "dispatch_checks.h"

namespace mirrored::kernels {
using namespace checks;
namespace {

// The flag's device pointer (null without a flag), after checking it sits beside `param`.
const int32_t* skip_flag_of(const char* op, const Tensor& param, const Tensor* flag) {
  if (!flag) return nullptr;
  MIRRORED_CHECK(flag->defined() && flag->dtype() == DType::kI32 && flag->numel() == 1, op,
                 ": the skip flag must be one int32");
  MIRRORED_CHECK(flag->device() == param.device(), op, ": skip flag on ", flag->device().str(), ", parameters on ",
                 param.device().str());
  return flag->data<int32_t>();
}

// The gradient factor's device pointer (null without one), after checking it sits beside `param`.
const float* grad_scale_of(const char* op, const Tensor& param, const Tensor* scale) {
  if (!scale) return nullptr;
  MIRRORED_CHECK(scale->defined() && scale->dtype() == DType::kF32 && scale->numel() == 1, op,
                 ": the gradient scale must be one float32");
  MIRRORED_CHECK(scale->device() == param.device(), op, ": gradient scale on ", scale->device().str(),
                 ", parameters on ", param.device().str());
  return scale->data<float>();
}

}  // namespace

void sgd_update(Tensor& param, const Tensor& grad, Tensor& velocity, const SgdHyper& hyper, const Tensor* skip_flag,
                const Tensor* grad_scale) {
  const bool cuda = on_cuda("sgd_update", {&param, &grad, &velocity});
  require_f32("sgd_update", {&param, &grad, &velocity});
  require_same_shape("sgd_update", param, grad);
  require_same_shape("sgd_update", param, velocity);
  const int32_t* skip = skip_flag_of("sgd_update", param, skip_flag);
  const float* scale = grad_scale_of("sgd_update", param, grad_scale);
  if (cuda)
    MIRRORED_ON_CUDA(param, sgd_update, param.data<float>(), grad.data<float>(), velocity.data<float>(), param.numel(),
                     hyper, skip, scale);
  if (skip && *skip != 0) return;
  cpu::sgd_update(param.data<float>(), grad.data<float>(), velocity.data<float>(), param.numel(), hyper,
                  scale ? *scale : 1.0f);
}

void adam_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamHyper& hyper, int64_t step,
                 const Tensor* skip_flag, const Tensor* grad_scale) {
  const bool cuda = on_cuda("adam_update", {&param, &grad, &m, &v});
  require_f32("adam_update", {&param, &grad, &m, &v});
  require_same_shape("adam_update", param, grad);
  require_same_shape("adam_update", param, m);
  require_same_shape("adam_update", param, v);
  MIRRORED_CHECK(step >= 1, "adam_update: step ", step, " (steps count from 1)");
  const int32_t* skip = skip_flag_of("adam_update", param, skip_flag);
  const float* scale = grad_scale_of("adam_update", param, grad_scale);
  if (cuda)
    MIRRORED_ON_CUDA(param, adam_update, param.data<float>(), grad.data<float>(), m.data<float>(), v.data<float>(),
                     param.numel(), hyper, step, skip, scale);
  if (skip && *skip != 0) return;
  cpu::adam_update(param.data<float>(), grad.data<float>(), m.data<float>(), v.data<float>(), param.numel(), hyper,
                   step, scale ? *scale : 1.0f);
}

}  // namespace mirrored::kernels
