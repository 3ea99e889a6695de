// Element-wise CUDA kernels: bias, ReLU, scale, axpy, product and sum of two buffers, the
// finiteness test and the bfloat16 wire conversions. Each is one pass over memory; all run on the compute stream
// unless a stream is named.
#include "cuda_kernels.h"
#include "launch.cuh"
#include "mirrored/core/bf16.h"
#include "mirrored/core/cuda_check.h"

namespace mirrored::kernels::cuda {
namespace {

__global__ void add_bias_kernel(float* y, const float* bias, int64_t rows, int64_t cols) {
  MIRRORED_GRID_STRIDE(i, rows * cols) y[i] += bias[i % cols];
}

// One thread per column, rows summed in order: adjacent threads read adjacent addresses,
// and the sum is deterministic (no atomics), like the CPU kernel's.
__global__ void bias_grad_kernel(const float* dy, float* dbias, int64_t rows, int64_t cols) {
  MIRRORED_GRID_STRIDE(col, cols) {
    float sum = 0.0f;
    for (int64_t r = 0; r < rows; ++r) sum += dy[r * cols + col];
    dbias[col] += sum;
  }
}

__global__ void relu_forward_kernel(const float* x, float* y, int64_t n) {
  MIRRORED_GRID_STRIDE(i, n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ void relu_backward_kernel(const float* y, const float* dy, float* dx, int64_t n) {
  MIRRORED_GRID_STRIDE(i, n) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void scale_kernel(float* x, int64_t n, float alpha) {
  MIRRORED_GRID_STRIDE(i, n) x[i] *= alpha;
}

__global__ void axpy_kernel(int64_t n, float alpha, const float* x, float* y) {
  MIRRORED_GRID_STRIDE(i, n) y[i] += alpha * x[i];
}

__global__ void multiply_kernel(const float* a, const float* b, float* y, int64_t n) {
  MIRRORED_GRID_STRIDE(i, n) y[i] = a[i] * b[i];
}

__global__ void add_kernel(const float* a, const float* b, float* y, int64_t n) {
  MIRRORED_GRID_STRIDE(i, n) y[i] = a[i] + b[i];
}

// NaN or Inf exactly when the exponent bits are all ones (the CPU kernel's test).
__global__ void non_finite_kernel(const float* x, int64_t n, int* flag) {
  int found = 0;
  MIRRORED_GRID_STRIDE(i, n) found |= (__float_as_uint(x[i]) & 0x7f800000u) == 0x7f800000u;
  if (__syncthreads_or(found) && threadIdx.x == 0) atomicOr(flag, 1);
}

__global__ void to_bf16_kernel(const float* in, uint16_t* out, int64_t n) {
  MIRRORED_GRID_STRIDE(i, n) out[i] = ::mirrored::float_to_bf16(in[i]);
}

__global__ void from_bf16_kernel(const uint16_t* in, float* out, int64_t n, float scale) {
  MIRRORED_GRID_STRIDE(i, n) out[i] = ::mirrored::bf16_to_float(in[i]) * scale;
}

__global__ void round_bf16_kernel(const float* in, float* out, int64_t n) {
  MIRRORED_GRID_STRIDE(i, n) out[i] = ::mirrored::bf16_to_float(::mirrored::float_to_bf16(in[i]));
}

}  // namespace

void add_bias(Context& ctx, float* y, const float* bias, int64_t rows, int64_t cols) {
  if (rows * cols == 0) return;
  add_bias_kernel<<<grid_for(rows * cols), kThreads, 0, ctx.stream()>>>(y, bias, rows, cols);
  MIRRORED_CUDA_CHECK_LAUNCH("add_bias_kernel");
}

void accumulate_bias_grad(Context& ctx, const float* dy, float* dbias, int64_t rows, int64_t cols) {
  if (cols == 0) return;
  bias_grad_kernel<<<grid_for(cols), kThreads, 0, ctx.stream()>>>(dy, dbias, rows, cols);
  MIRRORED_CUDA_CHECK_LAUNCH("bias_grad_kernel");
}

void relu_forward(Context& ctx, const float* x, float* y, int64_t n) {
  if (n == 0) return;
  relu_forward_kernel<<<grid_for(n), kThreads, 0, ctx.stream()>>>(x, y, n);
  MIRRORED_CUDA_CHECK_LAUNCH("relu_forward_kernel");
}

void relu_backward(Context& ctx, const float* y, const float* dy, float* dx, int64_t n) {
  if (n == 0) return;
  relu_backward_kernel<<<grid_for(n), kThreads, 0, ctx.stream()>>>(y, dy, dx, n);
  MIRRORED_CUDA_CHECK_LAUNCH("relu_backward_kernel");
}

void scale_on(cudaStream_t stream, float* x, int64_t n, float alpha) {
  if (n == 0) return;
  scale_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, n, alpha);
  MIRRORED_CUDA_CHECK_LAUNCH("scale_kernel");
}

void scale(Context& ctx, float* x, int64_t n, float alpha) { scale_on(ctx.stream(), x, n, alpha); }

void axpy(Context& ctx, int64_t n, float alpha, const float* x, float* y) {
  if (n == 0) return;
  axpy_kernel<<<grid_for(n), kThreads, 0, ctx.stream()>>>(n, alpha, x, y);
  MIRRORED_CUDA_CHECK_LAUNCH("axpy_kernel");
}

void multiply(Context& ctx, const float* a, const float* b, float* y, int64_t n) {
  if (n == 0) return;
  multiply_kernel<<<grid_for(n), kThreads, 0, ctx.stream()>>>(a, b, y, n);
  MIRRORED_CUDA_CHECK_LAUNCH("multiply_kernel");
}

void add(Context& ctx, const float* a, const float* b, float* y, int64_t n) {
  if (n == 0) return;
  add_kernel<<<grid_for(n), kThreads, 0, ctx.stream()>>>(a, b, y, n);
  MIRRORED_CUDA_CHECK_LAUNCH("add_kernel");
}

bool all_finite(Context& ctx, const float* x, int64_t n) {
  if (n == 0) return true;
  std::lock_guard lock(ctx.reduce_mutex);
  if (ctx.scratch.bytes() < sizeof(int)) ctx.scratch = DeviceBuffer(4096, ctx.device);
  if (ctx.host_scratch.bytes() < sizeof(int)) ctx.host_scratch = PinnedBuffer(4096);
  int* flag = ctx.scratch.as<int>();
  MIRRORED_CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(int), ctx.stream()));
  non_finite_kernel<<<grid_for(n), kThreads, 0, ctx.stream()>>>(x, n, flag);
  MIRRORED_CUDA_CHECK_LAUNCH("non_finite_kernel");
  MIRRORED_CUDA_CHECK(cudaMemcpyAsync(ctx.host_scratch.data(), flag, sizeof(int), cudaMemcpyDeviceToHost, ctx.stream()));
  MIRRORED_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
  return *static_cast<const int*>(ctx.host_scratch.data()) == 0;
}

void flag_non_finite(Context& ctx, const float* x, int64_t n, int32_t* flag) {
  MIRRORED_CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(int32_t), ctx.stream()));
  if (n == 0) return;
  non_finite_kernel<<<grid_for(n), kThreads, 0, ctx.stream()>>>(x, n, flag);
  MIRRORED_CUDA_CHECK_LAUNCH("non_finite_kernel");
}

void float_to_bf16(const float* in, uint16_t* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  to_bf16_kernel<<<grid_for(n), kThreads, 0, stream>>>(in, out, n);
  MIRRORED_CUDA_CHECK_LAUNCH("to_bf16_kernel");
}

void bf16_to_float(const uint16_t* in, float* out, int64_t n, float scale, cudaStream_t stream) {
  if (n == 0) return;
  from_bf16_kernel<<<grid_for(n), kThreads, 0, stream>>>(in, out, n, scale);
  MIRRORED_CUDA_CHECK_LAUNCH("from_bf16_kernel");
}

void round_to_bf16(const float* in, float* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  round_bf16_kernel<<<grid_for(n), kThreads, 0, stream>>>(in, out, n);
  MIRRORED_CUDA_CHECK_LAUNCH("round_bf16_kernel");
}

}  // namespace mirrored::kernels::cuda
