// Checked entry points of batch normalisation, in the pieces that let sync batch norm sum
// its statistics across replicas between them.
#include "cpu/cpu_kernels.h"
#include "dispatch_checks.h"

namespace mirrored::kernels {
using namespace checks;
namespace {

// [N, C, plane] view of a batch-norm input of rank >= 2.
struct BnShape {
  int64_t n, c, plane;
};
BnShape bn_shape(const char* op, const Tensor& x) {
  MIRRORED_CHECK(x.rank() >= 2, op, ": expected [N, C, ...], got ", shape_str(x.shape()));
  return {x.dim(0), x.dim(1), x.dim(0) * x.dim(1) > 0 ? x.numel() / (x.dim(0) * x.dim(1)) : 0};
}

// The fused batch norm, max pool and relu have no CUDA kernels.
void require_cpu(const char* op, std::initializer_list<const Tensor*> tensors) {
  MIRRORED_CHECK(!on_cuda(op, tensors), op, ": CPU only (a model on a GPU runs batch norm, max pool and relu as three "
                 "layers)");
}

// Their shapes, checked: x [N, C, H, W] (H, W >= 2), the pooled tensors [N, C, H/2, W/2],
// argmax int32, the per-channel vectors [C].
cpu::NormPoolShape norm_pool_shape(const char* op, const Tensor& x, const Tensor& y, const Tensor& argmax,
                                   std::initializer_list<const Tensor*> vectors) {
  MIRRORED_CHECK(x.rank() == 4 && x.dim(2) >= 2 && x.dim(3) >= 2, op, ": expected x [N, C, H >= 2, W >= 2], got ",
                 shape_str(x.shape()));
  const cpu::NormPoolShape s{x.dim(0), x.dim(1), x.dim(2), x.dim(3)};
  const Shape pooled = {s.n, s.c, s.oh(), s.ow()};
  MIRRORED_CHECK(y.shape() == pooled && argmax.shape() == pooled && argmax.dtype() == DType::kI32, op, ": y ",
                 shape_str(y.shape()), " and int32 argmax ", shape_str(argmax.shape()), ", expected ",
                 shape_str(pooled));
  require_f32(op, {&x, &y});
  for (const Tensor* t : vectors) {
    require_f32(op, {t});
    require_vector(op, *t, s.c, "vector");
  }
  return s;
}

}  // namespace

void batch_norm_sums(const Tensor& x, const Tensor& shift, Tensor& sums) {
  const char* op = "batch_norm_sums";
  const bool cuda = on_cuda(op, {&x, &shift, &sums});
  require_f32(op, {&x, &shift, &sums});
  const BnShape s = bn_shape(op, x);
  require_vector(op, shift, s.c, "shift");
  require_vector(op, sums, 2 * s.c + 1, "sums");
  if (cuda) MIRRORED_ON_CUDA(x, batch_norm_sums, x.data<float>(), shift.data<float>(), s.n, s.c, s.plane,
                             sums.data<float>());
  cpu::batch_norm_sums(x.data<float>(), shift.data<float>(), s.n, s.c, s.plane, sums.data<float>());
}

void batch_norm_statistics(const Tensor& sums, const Tensor& shift, float eps, float momentum, Tensor& mean,
                           Tensor& invstd, Tensor& running_mean, Tensor& running_var) {
  const char* op = "batch_norm_statistics";
  const bool cuda = on_cuda(op, {&sums, &shift, &mean, &invstd, &running_mean, &running_var});
  require_f32(op, {&sums, &shift, &mean, &invstd, &running_mean, &running_var});
  const int64_t c = shift.numel();
  for (const Tensor* t : std::initializer_list<const Tensor*>{&shift, &mean, &invstd, &running_mean, &running_var})
    require_vector(op, *t, c, "vector");
  require_vector(op, sums, 2 * c + 1, "sums");
  MIRRORED_CHECK(eps > 0.0f && momentum >= 0.0f && momentum <= 1.0f, op, ": eps ", eps, ", momentum ", momentum);
  // The count is checked here on the CPU only: on CUDA it lives in device memory, and reading
  // it back would stall the stream in every training step; the CUDA kernel turns an empty
  // batch into NaN statistics instead (a layer never gets there: its batch is not empty).
  if (cuda)
    MIRRORED_ON_CUDA(sums, batch_norm_statistics, sums.data<float>(), shift.data<float>(), c, eps, momentum,
                     mean.data<float>(), invstd.data<float>(), running_mean.data<float>(), running_var.data<float>());
  MIRRORED_CHECK(sums.data<float>()[2 * c] > 0.0f, op, ": statistics of an empty batch");
  cpu::batch_norm_statistics(sums.data<float>(), shift.data<float>(), c, eps, momentum, mean.data<float>(),
                             invstd.data<float>(), running_mean.data<float>(), running_var.data<float>());
}

void batch_norm_inference_statistics(const Tensor& running_mean, const Tensor& running_var, float eps,
                                     Tensor& mean, Tensor& invstd) {
  const char* op = "batch_norm_inference_statistics";
  const bool cuda = on_cuda(op, {&running_mean, &running_var, &mean, &invstd});
  require_f32(op, {&running_mean, &running_var, &mean, &invstd});
  const int64_t c = running_mean.numel();
  for (const Tensor* t : std::initializer_list<const Tensor*>{&running_mean, &running_var, &mean, &invstd})
    require_vector(op, *t, c, "vector");
  MIRRORED_CHECK(eps > 0.0f, op, ": eps ", eps);
  if (cuda)
    MIRRORED_ON_CUDA(running_mean, batch_norm_inference_statistics, running_mean.data<float>(),
                     running_var.data<float>(), c, eps, mean.data<float>(), invstd.data<float>());
  cpu::batch_norm_inference_statistics(running_mean.data<float>(), running_var.data<float>(), c, eps,
                                       mean.data<float>(), invstd.data<float>());
}

void batch_norm_apply(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& gamma,
                      const Tensor& beta, Tensor& y) {
  const char* op = "batch_norm_apply";
  const bool cuda = on_cuda(op, {&x, &mean, &invstd, &gamma, &beta, &y});
  require_f32(op, {&x, &mean, &invstd, &gamma, &beta, &y});
  const BnShape s = bn_shape(op, x);
  for (const Tensor* t : std::initializer_list<const Tensor*>{&mean, &invstd, &gamma, &beta})
    require_vector(op, *t, s.c, "vector");
  require_same_shape(op, x, y);
  if (cuda)
    MIRRORED_ON_CUDA(x, batch_norm_apply, x.data<float>(), mean.data<float>(), invstd.data<float>(),
                     gamma.data<float>(), beta.data<float>(), s.n, s.c, s.plane, y.data<float>());
  cpu::batch_norm_apply(x.data<float>(), mean.data<float>(), invstd.data<float>(), gamma.data<float>(),
                        beta.data<float>(), s.n, s.c, s.plane, y.data<float>());
}

void batch_norm_backward_sums(const Tensor& x, const Tensor& dy, const Tensor& mean, const Tensor& invstd,
                              Tensor& grad_sums) {
  const char* op = "batch_norm_backward_sums";
  const bool cuda = on_cuda(op, {&x, &dy, &mean, &invstd, &grad_sums});
  require_f32(op, {&x, &dy, &mean, &invstd, &grad_sums});
  const BnShape s = bn_shape(op, x);
  require_same_shape(op, x, dy);
  require_vector(op, mean, s.c, "mean");
  require_vector(op, invstd, s.c, "invstd");
  require_vector(op, grad_sums, 2 * s.c + 1, "grad_sums");
  if (cuda)
    MIRRORED_ON_CUDA(x, batch_norm_backward_sums, x.data<float>(), dy.data<float>(), mean.data<float>(),
                     invstd.data<float>(), s.n, s.c, s.plane, grad_sums.data<float>());
  cpu::batch_norm_backward_sums(x.data<float>(), dy.data<float>(), mean.data<float>(), invstd.data<float>(), s.n,
                                s.c, s.plane, grad_sums.data<float>());
}

void batch_norm_backward_input(const Tensor& x, const Tensor& dy, const Tensor& mean, const Tensor& invstd,
                               const Tensor& gamma, const Tensor& grad_sums, Tensor& dx) {
  const char* op = "batch_norm_backward_input";
  const bool cuda = on_cuda(op, {&x, &dy, &mean, &invstd, &gamma, &grad_sums, &dx});
  require_f32(op, {&x, &dy, &mean, &invstd, &gamma, &grad_sums, &dx});
  const BnShape s = bn_shape(op, x);
  require_same_shape(op, x, dy);
  require_same_shape(op, x, dx);
  for (const Tensor* t : std::initializer_list<const Tensor*>{&mean, &invstd, &gamma})
    require_vector(op, *t, s.c, "vector");
  require_vector(op, grad_sums, 2 * s.c + 1, "grad_sums");
  // As in batch_norm_statistics: on CUDA an empty batch gives a NaN dx instead of an error.
  if (cuda)
    MIRRORED_ON_CUDA(x, batch_norm_backward_input, x.data<float>(), dy.data<float>(), mean.data<float>(),
                     invstd.data<float>(), gamma.data<float>(), grad_sums.data<float>(), s.n, s.c, s.plane,
                     dx.data<float>());
  MIRRORED_CHECK(grad_sums.data<float>()[2 * s.c] > 0.0f, op, ": gradient of an empty batch");
  cpu::batch_norm_backward_input(x.data<float>(), dy.data<float>(), mean.data<float>(), invstd.data<float>(),
                                 gamma.data<float>(), grad_sums.data<float>(), s.n, s.c, s.plane, dx.data<float>());
}

void batch_norm_max_pool_relu_forward(const Tensor& x, const Tensor& mean, const Tensor& invstd,
                                      const Tensor& gamma, const Tensor& beta, Tensor& y, Tensor& argmax) {
  const char* op = "batch_norm_max_pool_relu_forward";
  require_cpu(op, {&x, &mean, &invstd, &gamma, &beta, &y, &argmax});
  const cpu::NormPoolShape s = norm_pool_shape(op, x, y, argmax, {&mean, &invstd, &gamma, &beta});
  cpu::batch_norm_max_pool_relu_forward(x.data<float>(), mean.data<float>(), invstd.data<float>(),
                                        gamma.data<float>(), beta.data<float>(), s, y.data<float>(),
                                        argmax.data<int32_t>());
}

void batch_norm_max_pool_relu_backward_sums(const Tensor& x, const Tensor& y, const Tensor& dy,
                                            const Tensor& argmax, const Tensor& mean, const Tensor& invstd,
                                            Tensor& grad_sums) {
  const char* op = "batch_norm_max_pool_relu_backward_sums";
  require_cpu(op, {&x, &y, &dy, &argmax, &mean, &invstd, &grad_sums});
  const cpu::NormPoolShape s = norm_pool_shape(op, x, y, argmax, {&mean, &invstd});
  require_f32(op, {&dy, &grad_sums});
  require_same_shape(op, y, dy);
  require_vector(op, grad_sums, 2 * s.c + 1, "grad_sums");
  cpu::batch_norm_max_pool_relu_backward_sums(x.data<float>(), y.data<float>(), dy.data<float>(),
                                              argmax.data<int32_t>(), mean.data<float>(), invstd.data<float>(), s,
                                              grad_sums.data<float>());
}

void batch_norm_max_pool_relu_backward_input(const Tensor& x, const Tensor& y, const Tensor& dy,
                                             const Tensor& argmax, const Tensor& mean, const Tensor& invstd,
                                             const Tensor& gamma, const Tensor& grad_sums, Tensor& dx) {
  const char* op = "batch_norm_max_pool_relu_backward_input";
  require_cpu(op, {&x, &y, &dy, &argmax, &mean, &invstd, &gamma, &grad_sums, &dx});
  const cpu::NormPoolShape s = norm_pool_shape(op, x, y, argmax, {&mean, &invstd, &gamma});
  require_f32(op, {&dy, &grad_sums, &dx});
  require_same_shape(op, y, dy);
  require_same_shape(op, x, dx);
  require_vector(op, grad_sums, 2 * s.c + 1, "grad_sums");
  MIRRORED_CHECK(grad_sums.data<float>()[2 * s.c] > 0.0f, op, ": gradient of an empty batch");
  cpu::batch_norm_max_pool_relu_backward_input(x.data<float>(), y.data<float>(), dy.data<float>(),
                                               argmax.data<int32_t>(), mean.data<float>(), invstd.data<float>(),
                                               gamma.data<float>(), grad_sums.data<float>(), s, dx.data<float>());
}

}  // namespace mirrored::kernels
