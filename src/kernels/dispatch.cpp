// The checked entry points of the op set: every shape, dtype and device rule is enforced
// here, once, so the CPU and CUDA implementations can assume valid arguments. Tensors on
// a GPU go to kernels::cuda (built with MIRRORED_WITH_CUDA), the others to kernels::cpu.
#include <algorithm>
#include <cstring>
#include <initializer_list>

#include "cpu/conv_backends.h"
#include "cpu/cpu_kernels.h"
#include "mirrored/core/bf16.h"
#include "mirrored/core/cuda_memory.h"
#include "mirrored/kernels/kernels.h"

#ifdef MIRRORED_WITH_CUDA
#include "cuda/cuda_kernels.h"
#endif

namespace mirrored::kernels {
namespace {

// Checks that every tensor exists and that all live on one device; true when it is a GPU.
bool on_cuda(const char* op, std::initializer_list<const Tensor*> tensors) {
  const Tensor& first = **tensors.begin();
  for (const Tensor* t : tensors) {
    MIRRORED_CHECK(t->defined(), op, ": undefined tensor");
    MIRRORED_CHECK(t->device() == first.device(), op, ": tensors on ", first.device().str(), " and ",
                   t->device().str());
  }
  return first.device().is_cuda();
}

#ifdef MIRRORED_WITH_CUDA
cuda::Context& cuda_context(const Tensor& t) { return cuda::context(t.device().index); }
// Each op below runs its CUDA branch as `if (cuda) return CUDA_CALL(...)`.
#define MIRRORED_ON_CUDA(tensor, fn, ...) return cuda::fn(cuda_context(tensor), __VA_ARGS__)
#else
// Unreachable in practice (a CPU-only build cannot allocate device tensors); kept so a
// future path that could cannot silently run a CPU kernel on device memory.
#define MIRRORED_ON_CUDA(tensor, fn, ...) \
  throw Error(ExitCode::kUsage, #fn ": this build of mirrored has no CUDA support", true)
#endif

void require_f32(const char* op, std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors)
    MIRRORED_CHECK(t->dtype() == DType::kF32, op, ": expected float32, got ", dtype_name(t->dtype()));
}

void require_same_shape(const char* op, const Tensor& a, const Tensor& b) {
  MIRRORED_CHECK(a.shape() == b.shape(), op, ": shapes ", shape_str(a.shape()), " and ",
                 shape_str(b.shape()), " differ");
}

void require_matrix(const char* op, const Tensor& t) {
  MIRRORED_CHECK(t.rank() == 2, op, ": expected a 2-D tensor, got ", shape_str(t.shape()));
}

}  // namespace

void gemm(bool transpose_a, bool transpose_b, float alpha, const Tensor& a, const Tensor& b, float beta,
          Tensor& c) {
  const bool cuda = on_cuda("gemm", {&a, &b, &c});
  require_f32("gemm", {&a, &b, &c});
  require_matrix("gemm", a);
  require_matrix("gemm", b);
  require_matrix("gemm", c);
  const int64_t m = transpose_a ? a.dim(1) : a.dim(0);
  const int64_t k = transpose_a ? a.dim(0) : a.dim(1);
  const int64_t kb = transpose_b ? b.dim(1) : b.dim(0);
  const int64_t n = transpose_b ? b.dim(0) : b.dim(1);
  MIRRORED_CHECK(k == kb && c.dim(0) == m && c.dim(1) == n, "gemm: op(a) ", m, "x", k, ", op(b) ", kb,
                 "x", n, ", c ", shape_str(c.shape()));
  if (cuda) MIRRORED_ON_CUDA(a, gemm, transpose_a, transpose_b, m, n, k, alpha, a.data<float>(), a.dim(1),
                                b.data<float>(), b.dim(1), beta, c.data<float>(), c.dim(1));
  cpu::gemm(transpose_a, transpose_b, m, n, k, alpha, a.data<float>(), a.dim(1), b.data<float>(),
            b.dim(1), beta, c.data<float>(), c.dim(1));
}

void add_bias(Tensor& y, const Tensor& bias) {
  const bool cuda = on_cuda("add_bias", {&y, &bias});
  require_f32("add_bias", {&y, &bias});
  require_matrix("add_bias", y);
  MIRRORED_CHECK(bias.rank() == 1 && bias.dim(0) == y.dim(1), "add_bias: bias ",
                 shape_str(bias.shape()), " for y ", shape_str(y.shape()));
  if (cuda) MIRRORED_ON_CUDA(y, add_bias, y.data<float>(), bias.data<float>(), y.dim(0), y.dim(1));
  cpu::add_bias(y.data<float>(), bias.data<float>(), y.dim(0), y.dim(1));
}

void accumulate_bias_grad(const Tensor& dy, Tensor& dbias) {
  const bool cuda = on_cuda("accumulate_bias_grad", {&dy, &dbias});
  require_f32("accumulate_bias_grad", {&dy, &dbias});
  require_matrix("accumulate_bias_grad", dy);
  MIRRORED_CHECK(dbias.rank() == 1 && dbias.dim(0) == dy.dim(1), "accumulate_bias_grad: dbias ",
                 shape_str(dbias.shape()), " for dy ", shape_str(dy.shape()));
  if (cuda) MIRRORED_ON_CUDA(dy, accumulate_bias_grad, dy.data<float>(), dbias.data<float>(), dy.dim(0), dy.dim(1));
  cpu::accumulate_bias_grad(dy.data<float>(), dbias.data<float>(), dy.dim(0), dy.dim(1));
}

void relu_forward(const Tensor& x, Tensor& y) {
  const bool cuda = on_cuda("relu_forward", {&x, &y});
  require_f32("relu_forward", {&x, &y});
  require_same_shape("relu_forward", x, y);
  if (cuda) MIRRORED_ON_CUDA(x, relu_forward, x.data<float>(), y.data<float>(), x.numel());
  cpu::relu_forward(x.data<float>(), y.data<float>(), x.numel());
}

void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  const bool cuda = on_cuda("relu_backward", {&y, &dy, &dx});
  require_f32("relu_backward", {&y, &dy, &dx});
  require_same_shape("relu_backward", y, dy);
  require_same_shape("relu_backward", y, dx);
  if (cuda) MIRRORED_ON_CUDA(y, relu_backward, y.data<float>(), dy.data<float>(), dx.data<float>(), y.numel());
  cpu::relu_backward(y.data<float>(), dy.data<float>(), dx.data<float>(), y.numel());
}

CrossEntropyResult softmax_cross_entropy(const Tensor& logits, const Tensor& labels, Tensor* dlogits,
                                         float grad_scale) {
  const char* op = "softmax_cross_entropy";
  const bool cuda = dlogits ? on_cuda(op, {&logits, &labels, dlogits}) : on_cuda(op, {&logits, &labels});
  require_f32(op, {&logits});
  require_matrix(op, logits);
  MIRRORED_CHECK(logits.dim(1) > 0, op, ": no classes in logits ", shape_str(logits.shape()));
  MIRRORED_CHECK(labels.dtype() == DType::kI32, op, ": labels must be int32, got ",
                 dtype_name(labels.dtype()));
  MIRRORED_CHECK(labels.rank() == 1 && labels.dim(0) == logits.dim(0), op, ": labels ",
                 shape_str(labels.shape()), " for logits ", shape_str(logits.shape()));
  if (dlogits) {
    require_f32(op, {dlogits});
    require_same_shape(op, logits, *dlogits);
  }
  if (cuda)
    MIRRORED_ON_CUDA(logits, softmax_cross_entropy, logits.data<float>(), labels.data<int32_t>(), logits.dim(0),
                     logits.dim(1), dlogits ? dlogits->data<float>() : nullptr, grad_scale);
  return cpu::softmax_cross_entropy(logits.data<float>(), labels.data<int32_t>(), logits.dim(0),
                                    logits.dim(1), dlogits ? dlogits->data<float>() : nullptr,
                                    grad_scale);
}

void scale(Tensor& x, float alpha) {
  const bool cuda = on_cuda("scale", {&x});
  require_f32("scale", {&x});
  if (cuda) MIRRORED_ON_CUDA(x, scale, x.data<float>(), x.numel(), alpha);
  cpu::scale(x.data<float>(), x.numel(), alpha);
}

void scale(float* x, int64_t n, Device device, float alpha) {
  if (n <= 0) return;
#ifdef MIRRORED_WITH_CUDA
  if (device.is_cuda()) return cuda::scale(cuda::context(device.index), x, n, alpha);
#endif
  MIRRORED_CHECK(device.is_cpu(), "scale on ", device.str(), " in a build without CUDA");
  cpu::scale(x, n, alpha);
}

void to_bf16(const float* x, uint16_t* wire, int64_t n, Device device) {
  if (n <= 0) return;
#ifdef MIRRORED_WITH_CUDA
  if (device.is_cuda()) return cuda::float_to_bf16(x, wire, n, cuda::context(device.index).stream);
#endif
  MIRRORED_CHECK(device.is_cpu(), "to_bf16 on ", device.str(), " in a build without CUDA");
  for (int64_t i = 0; i < n; ++i) wire[i] = float_to_bf16(x[i]);
}

void from_bf16(const uint16_t* wire, float* x, int64_t n, Device device, float alpha) {
  if (n <= 0) return;
#ifdef MIRRORED_WITH_CUDA
  if (device.is_cuda()) return cuda::bf16_to_float(wire, x, n, alpha, cuda::context(device.index).stream);
#endif
  MIRRORED_CHECK(device.is_cpu(), "from_bf16 on ", device.str(), " in a build without CUDA");
  for (int64_t i = 0; i < n; ++i) x[i] = bf16_to_float(wire[i]) * alpha;
}

void axpy(float alpha, const Tensor& x, Tensor& y) {
  const bool cuda = on_cuda("axpy", {&x, &y});
  require_f32("axpy", {&x, &y});
  require_same_shape("axpy", x, y);
  if (cuda) MIRRORED_ON_CUDA(x, axpy, x.numel(), alpha, x.data<float>(), y.data<float>());
  cpu::axpy(x.numel(), alpha, x.data<float>(), y.data<float>());
}

void copy(const Tensor& src, Tensor& dst) {
  MIRRORED_CHECK(src.defined() && dst.defined(), "copy: undefined tensor");
  MIRRORED_CHECK(src.dtype() == dst.dtype(), "copy: ", dtype_name(src.dtype()), " to ",
                 dtype_name(dst.dtype()));
  require_same_shape("copy", src, dst);
  if (src.bytes() == 0) return;
  // Views are always contiguous, so a copy is one block whichever devices are involved.
  if (src.device().is_cpu() && dst.device().is_cpu()) {
    std::memmove(dst.raw(), src.raw(), src.bytes());
  } else {
    cuda_copy(dst.raw(), src.raw(), src.bytes());
  }
}

bool all_finite(const Tensor& x) {
  const bool cuda = on_cuda("all_finite", {&x});
  require_f32("all_finite", {&x});
  if (cuda) MIRRORED_ON_CUDA(x, all_finite, x.data<float>(), x.numel());
  return cpu::all_finite(x.data<float>(), x.numel());
}

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

int64_t conv_output_size(int64_t input, int64_t kernel, int64_t stride, int64_t padding) {
  if (stride <= 0) return 0;
  const int64_t span = input + 2 * padding - kernel;
  return span < 0 ? 0 : span / stride + 1;
}

namespace {

void require_nchw(const char* op, const Tensor& t) {
  MIRRORED_CHECK(t.rank() == 4, op, ": expected an [N, C, H, W] tensor, got ", shape_str(t.shape()));
}

void require_vector(const char* op, const Tensor& t, int64_t n, const char* what) {
  MIRRORED_CHECK(t.rank() == 1 && t.dim(0) == n, op, ": ", what, " ", shape_str(t.shape()), ", expected [", n,
                 "]");
}

ConvShape conv_shape(const char* op, const Tensor& x, const Tensor& weight, const Conv2dParams& p) {
  require_nchw(op, x);
  require_nchw(op, weight);
  MIRRORED_CHECK(p.stride >= 1 && p.padding >= 0 && p.kernel_h >= 1 && p.kernel_w >= 1, op, ": stride ",
                 p.stride, ", padding ", p.padding, ", kernel ", p.kernel_h, "x", p.kernel_w);
  MIRRORED_CHECK(weight.dim(1) == x.dim(1) && weight.dim(2) == p.kernel_h && weight.dim(3) == p.kernel_w, op,
                 ": weight ", shape_str(weight.shape()), " for input ", shape_str(x.shape()), " and kernel ",
                 p.kernel_h, "x", p.kernel_w);
  ConvShape s;
  s.n = x.dim(0);
  s.c = x.dim(1);
  s.h = x.dim(2);
  s.w = x.dim(3);
  s.oc = weight.dim(0);
  s.kh = p.kernel_h;
  s.kw = p.kernel_w;
  s.stride = p.stride;
  s.pad = p.padding;
  s.oh = conv_output_size(s.h, s.kh, s.stride, s.pad);
  s.ow = conv_output_size(s.w, s.kw, s.stride, s.pad);
  MIRRORED_CHECK(s.oh > 0 && s.ow > 0, op, ": kernel ", s.kh, "x", s.kw, " does not fit input ",
                 shape_str(x.shape()), " with padding ", s.pad);
  return s;
}

PoolShape pool_shape(const char* op, const Tensor& x, const Pool2dParams& p) {
  require_nchw(op, x);
  MIRRORED_CHECK(p.stride >= 1 && p.kernel_h >= 1 && p.kernel_w >= 1 && p.padding >= 0 &&
                     2 * p.padding <= std::min(p.kernel_h, p.kernel_w),
                 op, ": kernel ", p.kernel_h, "x", p.kernel_w, ", stride ", p.stride, ", padding ", p.padding,
                 " (padding may be at most half the kernel)");
  PoolShape s;
  s.planes = x.dim(0) * x.dim(1);
  s.h = x.dim(2);
  s.w = x.dim(3);
  s.kh = p.kernel_h;
  s.kw = p.kernel_w;
  s.stride = p.stride;
  s.pad = p.padding;
  s.oh = conv_output_size(s.h, s.kh, s.stride, s.pad);
  s.ow = conv_output_size(s.w, s.kw, s.stride, s.pad);
  MIRRORED_CHECK(s.oh > 0 && s.ow > 0, op, ": window ", s.kh, "x", s.kw, " does not fit input ",
                 shape_str(x.shape()));
  return s;
}

// [N, C, plane] view of a batch-norm input of rank >= 2.
struct BnShape {
  int64_t n, c, plane;
};
BnShape bn_shape(const char* op, const Tensor& x) {
  MIRRORED_CHECK(x.rank() >= 2, op, ": expected [N, C, ...], got ", shape_str(x.shape()));
  return {x.dim(0), x.dim(1), x.dim(0) * x.dim(1) > 0 ? x.numel() / (x.dim(0) * x.dim(1)) : 0};
}

}  // namespace

void conv2d_forward(const Tensor& x, const Tensor& weight, const Tensor* bias, const Conv2dParams& params,
                    Tensor& y, Tensor& workspace) {
  const char* op = "conv2d_forward";
  const bool cuda = on_cuda(op, {&x, &weight, &y});
  require_f32(op, {&x, &weight, &y});
  const ConvShape s = conv_shape(op, x, weight, params);
  if (bias) {
    require_f32(op, {bias});
    require_vector(op, *bias, s.oc, "bias");
  }
  MIRRORED_CHECK(y.shape() == Shape({s.n, s.oc, s.oh, s.ow}), op, ": y ", shape_str(y.shape()), ", expected [",
                 s.n, ", ", s.oc, ", ", s.oh, ", ", s.ow, "]");
  // On CUDA `workspace` is not used: cuDNN's plans share one workspace per device.
  if (cuda) MIRRORED_ON_CUDA(x, conv2d_forward, x.data<float>(), weight.data<float>(),
                             bias ? bias->data<float>() : nullptr, s, y.data<float>());
  ensure_shape(workspace, {cpu::conv2d_workspace_floats(s)}, DType::kF32, x.device());
  cpu::conv2d_forward(x.data<float>(), weight.data<float>(), bias ? bias->data<float>() : nullptr, s,
                      y.data<float>(), workspace.data<float>());
}

void conv2d_backward(const Tensor& x, const Tensor& weight, const Tensor& dy, const Conv2dParams& params,
                     Tensor* dx, Tensor& dweight, Tensor* dbias, Tensor& workspace) {
  const char* op = "conv2d_backward";
  const bool cuda = on_cuda(op, {&x, &weight, &dy, &dweight});
  require_f32(op, {&x, &weight, &dy, &dweight});
  const ConvShape s = conv_shape(op, x, weight, params);
  MIRRORED_CHECK(dy.shape() == Shape({s.n, s.oc, s.oh, s.ow}), op, ": dy ", shape_str(dy.shape()),
                 ", expected [", s.n, ", ", s.oc, ", ", s.oh, ", ", s.ow, "]");
  require_same_shape(op, weight, dweight);
  if (dx) {
    require_f32(op, {dx});
    require_same_shape(op, x, *dx);
  }
  if (dbias) {
    require_f32(op, {dbias});
    require_vector(op, *dbias, s.oc, "dbias");
  }
  if (cuda)
    MIRRORED_ON_CUDA(x, conv2d_backward, x.data<float>(), weight.data<float>(), dy.data<float>(), s,
                     dx ? dx->data<float>() : nullptr, dweight.data<float>(), dbias ? dbias->data<float>() : nullptr);
  ensure_shape(workspace, {cpu::conv2d_workspace_floats(s)}, DType::kF32, x.device());
  cpu::conv2d_backward(x.data<float>(), weight.data<float>(), dy.data<float>(), s,
                       dx ? dx->data<float>() : nullptr, dweight.data<float>(),
                       dbias ? dbias->data<float>() : nullptr, workspace.data<float>());
}

void max_pool2d_forward(const Tensor& x, const Pool2dParams& params, Tensor& y, Tensor& argmax) {
  const char* op = "max_pool2d_forward";
  const bool cuda = on_cuda(op, {&x, &y, &argmax});
  require_f32(op, {&x, &y});
  const PoolShape s = pool_shape(op, x, params);
  const Shape out = {x.dim(0), x.dim(1), s.oh, s.ow};
  MIRRORED_CHECK(y.shape() == out && argmax.shape() == out && argmax.dtype() == DType::kI32, op, ": y ",
                 shape_str(y.shape()), " and int32 argmax ", shape_str(argmax.shape()), ", expected ",
                 shape_str(out));
  if (cuda) MIRRORED_ON_CUDA(x, max_pool2d_forward, x.data<float>(), s, y.data<float>(), argmax.data<int32_t>());
  cpu::max_pool2d_forward(x.data<float>(), s, y.data<float>(), argmax.data<int32_t>());
}

void max_pool2d_backward(const Tensor& dy, const Tensor& argmax, const Pool2dParams& params, Tensor& dx) {
  const char* op = "max_pool2d_backward";
  const bool cuda = on_cuda(op, {&dy, &argmax, &dx});
  require_f32(op, {&dy, &dx});
  const PoolShape s = pool_shape(op, dx, params);
  MIRRORED_CHECK(dy.shape() == Shape({dx.dim(0), dx.dim(1), s.oh, s.ow}), op, ": dy ", shape_str(dy.shape()),
                 " for dx ", shape_str(dx.shape()));
  require_same_shape(op, dy, argmax);
  MIRRORED_CHECK(argmax.dtype() == DType::kI32, op, ": argmax must be int32, got ", dtype_name(argmax.dtype()));
  if (cuda) MIRRORED_ON_CUDA(dy, max_pool2d_backward, dy.data<float>(), argmax.data<int32_t>(), s, dx.data<float>());
  cpu::max_pool2d_backward(dy.data<float>(), argmax.data<int32_t>(), s.planes, s.h * s.w, s.oh * s.ow,
                           dx.data<float>());
}

void avg_pool2d_forward(const Tensor& x, const Pool2dParams& params, Tensor& y) {
  const char* op = "avg_pool2d_forward";
  const bool cuda = on_cuda(op, {&x, &y});
  require_f32(op, {&x, &y});
  const PoolShape s = pool_shape(op, x, params);
  MIRRORED_CHECK(y.shape() == Shape({x.dim(0), x.dim(1), s.oh, s.ow}), op, ": y ", shape_str(y.shape()));
  if (cuda) MIRRORED_ON_CUDA(x, avg_pool2d_forward, x.data<float>(), s, y.data<float>());
  cpu::avg_pool2d_forward(x.data<float>(), s, y.data<float>());
}

void avg_pool2d_backward(const Tensor& dy, const Pool2dParams& params, Tensor& dx) {
  const char* op = "avg_pool2d_backward";
  const bool cuda = on_cuda(op, {&dy, &dx});
  require_f32(op, {&dy, &dx});
  const PoolShape s = pool_shape(op, dx, params);
  MIRRORED_CHECK(dy.shape() == Shape({dx.dim(0), dx.dim(1), s.oh, s.ow}), op, ": dy ", shape_str(dy.shape()),
                 " for dx ", shape_str(dx.shape()));
  if (cuda) MIRRORED_ON_CUDA(dy, avg_pool2d_backward, dy.data<float>(), s, dx.data<float>());
  cpu::avg_pool2d_backward(dy.data<float>(), s, dx.data<float>());
}

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

void dropout_forward(const Tensor& x, float p, uint64_t seed, int64_t first_sample, Tensor& mask, Tensor& y) {
  const char* op = "dropout_forward";
  const bool cuda = on_cuda(op, {&x, &mask, &y});
  require_f32(op, {&x, &mask, &y});
  require_same_shape(op, x, mask);
  require_same_shape(op, x, y);
  MIRRORED_CHECK(x.rank() >= 1 && p >= 0.0f && p < 1.0f && first_sample >= 0, op, ": p ", p, ", x ",
                 shape_str(x.shape()), ", first sample ", first_sample);
  const int64_t n = x.dim(0), sample_numel = n > 0 ? x.numel() / n : 0;
  if (cuda)
    MIRRORED_ON_CUDA(x, dropout_forward, x.data<float>(), p, seed, first_sample, n, sample_numel, mask.data<float>(),
                     y.data<float>());
  cpu::dropout_forward(x.data<float>(), p, seed, first_sample, n, sample_numel, mask.data<float>(), y.data<float>());
}

void dropout_backward(const Tensor& dy, const Tensor& mask, Tensor& dx) {
  const char* op = "dropout_backward";
  const bool cuda = on_cuda(op, {&dy, &mask, &dx});
  require_f32(op, {&dy, &mask, &dx});
  require_same_shape(op, dy, mask);
  require_same_shape(op, dy, dx);
  if (cuda) MIRRORED_ON_CUDA(dy, multiply, dy.data<float>(), mask.data<float>(), dx.data<float>(), dy.numel());
  cpu::multiply(dy.data<float>(), mask.data<float>(), dx.data<float>(), dy.numel());
}

void add(const Tensor& a, const Tensor& b, Tensor& y) {
  const bool cuda = on_cuda("add", {&a, &b, &y});
  require_f32("add", {&a, &b, &y});
  require_same_shape("add", a, b);
  require_same_shape("add", a, y);
  if (cuda) MIRRORED_ON_CUDA(a, add, a.data<float>(), b.data<float>(), y.data<float>(), a.numel());
  cpu::add(a.data<float>(), b.data<float>(), y.data<float>(), a.numel());
}

void set_cpu_threads(int threads) { cpu::set_threads(threads); }
int cpu_threads() { return cpu::threads(); }
std::string cpu_blas_core() { return cpu::blas_core(); }
std::string cpu_blas_core_upgrade() { return cpu::better_blas_core(); }
std::string cpu_onednn_version() { return cpu::onednn_version(); }

}  // namespace mirrored::kernels
