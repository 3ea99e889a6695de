// Per-step statistics on the GPU, queued on the compute stream and never waited for: the
// non-finite tally and gradient clipping by global norm (formula in kernels/clip_math.h).
// The sum of squares is deterministic: a fixed grid of blocks each sums a strided run in
// double, then one block adds the block sums in order.
#include "cuda_kernels.h"
#include "launch.cuh"
#include "mirrored/core/cuda_check.h"
#include "mirrored/kernels/clip_math.h"

namespace mirrored::kernels::cuda {
namespace {

constexpr int64_t kSumBlocks = 256;  // fixed, so the summation order does not depend on the GPU

__global__ void tally_kernel(int32_t* flag, int32_t* tally, int32_t step, bool latch) {
  if (latch && tally[0] > 0) flag[0] = 1;
  if (flag[0] == 0) return;
  ++tally[0];
  if (tally[1] == 0) tally[1] = step;
}

// Sums `count` doubles (or squares of floats) per block into out[blockIdx.x], tree order.
__device__ void block_sum_to(double value, double* out) {
  __shared__ double sums[kThreads];
  sums[threadIdx.x] = value;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) sums[threadIdx.x] += sums[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = sums[0];
}

__global__ void partial_squares_kernel(const float* x, int64_t n, double* partials) {
  double sum = 0.0;
  MIRRORED_GRID_STRIDE(i, n) sum += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  block_sum_to(sum, partials + blockIdx.x);
}

__global__ void total_kernel(const double* partials, int64_t count, float* sum) {
  double value = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += kThreads) value += partials[i];
  __shared__ double total;
  block_sum_to(value, &total);
  __syncthreads();
  if (threadIdx.x == 0) *sum = static_cast<float>(total);
}

__global__ void clip_kernel(float* x, int64_t n, const float* sum_squares, float max_norm, float* norm) {
  const float total = norm_of_sum_squares(*sum_squares);
  const float factor = clip_scale(total, max_norm);
  MIRRORED_GRID_STRIDE(i, n) x[i] *= factor;
  if (blockIdx.x == 0 && threadIdx.x == 0) *norm = total;
}

__global__ void clip_factor_kernel(const float* sum_squares, float max_norm, float* norm, float* factor) {
  const float total = norm_of_sum_squares(*sum_squares);
  *norm = total;
  *factor = clip_scale(total, max_norm);
}

}  // namespace

void tally_non_finite(Context& ctx, int32_t* flag, int32_t* tally, int32_t step, bool latch) {
  tally_kernel<<<1, 1, 0, ctx.stream()>>>(flag, tally, step, latch);
  MIRRORED_CUDA_CHECK_LAUNCH("tally_kernel");
}

int64_t sum_squares_partials(int64_t) { return kSumBlocks; }

void sum_squares(Context& ctx, const float* x, int64_t n, float* sum, double* partials) {
  partial_squares_kernel<<<kSumBlocks, kThreads, 0, ctx.stream()>>>(x, n, partials);
  MIRRORED_CUDA_CHECK_LAUNCH("partial_squares_kernel");
  total_kernel<<<1, kThreads, 0, ctx.stream()>>>(partials, kSumBlocks, sum);
  MIRRORED_CUDA_CHECK_LAUNCH("total_kernel");
}

void scale_by_clip(Context& ctx, float* x, int64_t n, const float* sum_squares, float max_norm, float* norm) {
  clip_kernel<<<grid_for(n), kThreads, 0, ctx.stream()>>>(x, n, sum_squares, max_norm, norm);
  MIRRORED_CUDA_CHECK_LAUNCH("clip_kernel");
}

void clip_factor(Context& ctx, const float* sum_squares, float max_norm, float* norm, float* factor) {
  clip_factor_kernel<<<1, 1, 0, ctx.stream()>>>(sum_squares, max_norm, norm, factor);
  MIRRORED_CUDA_CHECK_LAUNCH("clip_factor_kernel");
}

}  // namespace mirrored::kernels::cuda
