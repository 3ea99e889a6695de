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

}  // namespace mirrored::kernels
