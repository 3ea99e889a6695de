// The checked entry points of the op set: every shape, dtype and device rule is enforced
// here, once, so the CPU and CUDA implementations can assume valid arguments. Tensors on
// a GPU go to kernels::cuda (built with MIRRORED_WITH_CUDA), the others to kernels::cpu.
#include <cstring>
#include <initializer_list>

#include "cpu/cpu_kernels.h"
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

void set_cpu_threads(int threads) { cpu::set_threads(threads); }
int cpu_threads() { return cpu::threads(); }

}  // namespace mirrored::kernels
