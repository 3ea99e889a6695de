// Checked entry points of the element-wise ops: activations, scaling, copies, dropout.
#include <cstring>

#include "cpu/cpu_kernels.h"
#include "dispatch_checks.h"
#include "mirrored/core/bf16.h"
#include "mirrored/core/cuda_memory.h"

namespace mirrored::kernels {
using namespace checks;

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
  if (device.is_cuda()) return cuda::float_to_bf16(x, wire, n, cuda::context(device.index).stream());
#endif
  MIRRORED_CHECK(device.is_cpu(), "to_bf16 on ", device.str(), " in a build without CUDA");
  cpu::round_to_bf16_bits(x, wire, n);
}

void from_bf16(const uint16_t* wire, float* x, int64_t n, Device device, float alpha) {
  if (n <= 0) return;
#ifdef MIRRORED_WITH_CUDA
  if (device.is_cuda()) return cuda::bf16_to_float(wire, x, n, alpha, cuda::context(device.index).stream());
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
  } else if (src.device() == dst.device()) {
    // Within one GPU: queued on its compute stream, no host wait (a per-step copy).
    cuda_copy_on_device(dst.raw(), src.raw(), src.bytes(), dst.device().index);
  } else {
    // To or from the host (which may read the result at once), or between GPUs.
    cuda_copy(dst.raw(), src.raw(), src.bytes());
  }
}

bool all_finite(const Tensor& x) {
  const bool cuda = on_cuda("all_finite", {&x});
  require_f32("all_finite", {&x});
  if (cuda) MIRRORED_ON_CUDA(x, all_finite, x.data<float>(), x.numel());
  return cpu::all_finite(x.data<float>(), x.numel());
}

void flag_non_finite(const Tensor& x, Tensor& flag) {
  const bool cuda = on_cuda("flag_non_finite", {&x, &flag});
  require_f32("flag_non_finite", {&x});
  MIRRORED_CHECK(flag.dtype() == DType::kI32 && flag.numel() == 1, "flag_non_finite: the flag must be one int32, got ",
                 dtype_name(flag.dtype()), " ", shape_str(flag.shape()));
  if (cuda) MIRRORED_ON_CUDA(x, flag_non_finite, x.data<float>(), x.numel(), flag.data<int32_t>());
  flag.data<int32_t>()[0] = cpu::all_finite(x.data<float>(), x.numel()) ? 0 : 1;
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

}  // namespace mirrored::kernels
