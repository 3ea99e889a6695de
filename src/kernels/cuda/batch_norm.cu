// Batch normalisation in the pieces of kernels.h (sums -> statistics -> apply; backward
// sums -> input gradient), so that sync batch norm can sum across replicas in between.
//
// The reductions run one block per channel: every thread accumulates its share in double,
// then the block adds the shares in a fixed tree. That is as exact as the CPU's (float lanes
// per plane, double across planes) and gives the same bits on every run. The per-element
// kernels repeat the CPU's float expressions with explicit rounding (__fmul_rn and kin), so
// the compiler cannot fuse a multiply and an add into an FMA that the CPU does not do.
#include "cuda_kernels.h"
#include "launch.cuh"
#include "mirrored/core/cuda_check.h"

namespace mirrored::kernels::cuda {
namespace {

constexpr int kReduceThreads = 512;  // a power of two (the tree below halves it)

__device__ float quiet_nan() { return __int_as_float(0x7fc00000); }

// Sums a and b over the block; the totals are valid in thread 0.
__device__ void block_sum(double& a, double& b) {
  __shared__ double shared_a[kReduceThreads], shared_b[kReduceThreads];
  const int t = threadIdx.x;
  shared_a[t] = a;
  shared_b[t] = b;
  __syncthreads();
  for (int half = kReduceThreads / 2; half > 0; half /= 2) {
    if (t < half) {
      shared_a[t] += shared_a[t + half];
      shared_b[t] += shared_b[t + half];
    }
    __syncthreads();
  }
  a = shared_a[0];
  b = shared_b[0];
}

// sums = {sum (x - shift), sum (x - shift)^2, count}; block = channel.
__global__ void sums_kernel(const float* x, const float* shift, int64_t n, int64_t c, int64_t plane, float count,
                            float* sums) {
  const int64_t ch = blockIdx.x;
  if (ch == 0 && threadIdx.x == 0) sums[2 * c] = count;
  if (ch >= c) return;  // the one block launched for c = 0
  const float sh = shift[ch];
  double s1 = 0.0, s2 = 0.0;
  for (int64_t j = threadIdx.x; j < n * plane; j += kReduceThreads) {
    const int64_t b = j / plane, i = j - b * plane;
    const float d = __fsub_rn(x[(b * c + ch) * plane + i], sh);
    s1 += d;
    s2 += __fmul_rn(d, d);
  }
  block_sum(s1, s2);
  if (threadIdx.x == 0) {
    sums[ch] = static_cast<float>(s1);
    sums[c + ch] = static_cast<float>(s2);
  }
}

// Per channel, in double, as the CPU; an empty batch gives NaN and leaves the running
// statistics alone.
__global__ void statistics_kernel(const float* sums, const float* shift, int64_t c, float eps, float momentum,
                                  float* mean, float* invstd, float* running_mean, float* running_var) {
  const double count = sums[2 * c];
  MIRRORED_GRID_STRIDE(ch, c) {
    if (!(count > 0.0)) {
      mean[ch] = quiet_nan();
      invstd[ch] = quiet_nan();
      continue;
    }
    const double d_mean = sums[ch] / count;  // mean - shift
    const double raw_var = __dsub_rn(sums[c + ch] / count, __dmul_rn(d_mean, d_mean));
    const double var = raw_var < 0.0 ? 0.0 : raw_var;  // std::max(raw_var, 0.0), NaN kept
    const double m = shift[ch] + d_mean;
    mean[ch] = static_cast<float>(m);
    invstd[ch] = static_cast<float>(1.0 / sqrt(var + eps));
    const double unbiased = count > 1 ? var * count / (count - 1) : var;
    const double keep = 1.0 - momentum;
    running_mean[ch] = static_cast<float>(__dadd_rn(__dmul_rn(keep, running_mean[ch]), __dmul_rn(momentum, m)));
    running_var[ch] =
        static_cast<float>(__dadd_rn(__dmul_rn(keep, running_var[ch]), __dmul_rn(momentum, unbiased)));
  }
}

__global__ void inference_statistics_kernel(const float* running_mean, const float* running_var, int64_t c,
                                            float eps, float* mean, float* invstd) {
  MIRRORED_GRID_STRIDE(ch, c) {
    mean[ch] = running_mean[ch];
    invstd[ch] = static_cast<float>(1.0 / sqrt(static_cast<double>(running_var[ch]) + eps));
  }
}

// y = x * scale + offset, scale = invstd * gamma, offset = beta - mean * scale.
__global__ void apply_kernel(const float* x, const float* mean, const float* invstd, const float* gamma,
                             const float* beta, int64_t c, int64_t plane, int64_t total, float* y) {
  MIRRORED_GRID_STRIDE(i, total) {
    const int64_t ch = (i / plane) % c;
    const float scale = __fmul_rn(invstd[ch], gamma[ch]);
    const float offset = __fsub_rn(beta[ch], __fmul_rn(mean[ch], scale));
    y[i] = __fadd_rn(__fmul_rn(x[i], scale), offset);
  }
}

// grad_sums = {sum dy, invstd * sum dy (x - mean), count}; block = channel.
__global__ void backward_sums_kernel(const float* x, const float* dy, const float* mean, const float* invstd,
                                     int64_t n, int64_t c, int64_t plane, float count, float* grad_sums) {
  const int64_t ch = blockIdx.x;
  if (ch == 0 && threadIdx.x == 0) grad_sums[2 * c] = count;
  if (ch >= c) return;
  const float m = mean[ch];
  double s1 = 0.0, s2 = 0.0;
  for (int64_t j = threadIdx.x; j < n * plane; j += kReduceThreads) {
    const int64_t b = j / plane, i = j - b * plane;
    const int64_t at = (b * c + ch) * plane + i;
    const float g = dy[at];
    s1 += g;
    s2 += __fmul_rn(g, __fsub_rn(x[at], m));
  }
  block_sum(s1, s2);
  if (threadIdx.x == 0) {
    grad_sums[ch] = static_cast<float>(s1);
    grad_sums[c + ch] = static_cast<float>(s2 * invstd[ch]);
  }
}

// dx = gamma invstd (dy - sum dy / count - (x - mean) invstd sum (dy xhat) / count).
__global__ void backward_input_kernel(const float* x, const float* dy, const float* mean, const float* invstd,
                                      const float* gamma, const float* grad_sums, int64_t c, int64_t plane,
                                      int64_t total, float* dx) {
  const float count = grad_sums[2 * c];
  MIRRORED_GRID_STRIDE(i, total) {
    if (!(count > 0.0f)) {
      dx[i] = quiet_nan();
      continue;
    }
    const int64_t ch = (i / plane) % c;
    const float g = __fmul_rn(gamma[ch], invstd[ch]);
    const float mean_dy = __fdiv_rn(grad_sums[ch], count);
    const float k = __fdiv_rn(__fmul_rn(invstd[ch], grad_sums[c + ch]), count);
    const float centred = __fsub_rn(dy[i], mean_dy);
    dx[i] = __fmul_rn(g, __fsub_rn(centred, __fmul_rn(__fsub_rn(x[i], mean[ch]), k)));
  }
}

unsigned channel_blocks(int64_t c) { return static_cast<unsigned>(c > 0 ? c : 1); }

}  // namespace

void batch_norm_sums(Context& ctx, const float* x, const float* shift, int64_t n, int64_t c, int64_t plane,
                     float* sums) {
  sums_kernel<<<channel_blocks(c), kReduceThreads, 0, ctx.stream()>>>(x, shift, n, c, plane,
                                                                     static_cast<float>(n * plane), sums);
  MIRRORED_CUDA_CHECK_LAUNCH("sums_kernel");
}

void batch_norm_statistics(Context& ctx, const float* sums, const float* shift, int64_t c, float eps,
                           float momentum, float* mean, float* invstd, float* running_mean, float* running_var) {
  if (c == 0) return;
  statistics_kernel<<<grid_for(c), kThreads, 0, ctx.stream()>>>(sums, shift, c, eps, momentum, mean, invstd,
                                                               running_mean, running_var);
  MIRRORED_CUDA_CHECK_LAUNCH("statistics_kernel");
}

void batch_norm_inference_statistics(Context& ctx, const float* running_mean, const float* running_var, int64_t c,
                                     float eps, float* mean, float* invstd) {
  if (c == 0) return;
  inference_statistics_kernel<<<grid_for(c), kThreads, 0, ctx.stream()>>>(running_mean, running_var, c, eps, mean,
                                                                         invstd);
  MIRRORED_CUDA_CHECK_LAUNCH("inference_statistics_kernel");
}

void batch_norm_apply(Context& ctx, const float* x, const float* mean, const float* invstd, const float* gamma,
                      const float* beta, int64_t n, int64_t c, int64_t plane, float* y) {
  const int64_t total = n * c * plane;
  if (total == 0) return;
  apply_kernel<<<grid_for(total), kThreads, 0, ctx.stream()>>>(x, mean, invstd, gamma, beta, c, plane, total, y);
  MIRRORED_CUDA_CHECK_LAUNCH("apply_kernel");
}

void batch_norm_backward_sums(Context& ctx, const float* x, const float* dy, const float* mean,
                              const float* invstd, int64_t n, int64_t c, int64_t plane, float* grad_sums) {
  backward_sums_kernel<<<channel_blocks(c), kReduceThreads, 0, ctx.stream()>>>(
      x, dy, mean, invstd, n, c, plane, static_cast<float>(n * plane), grad_sums);
  MIRRORED_CUDA_CHECK_LAUNCH("backward_sums_kernel");
}

void batch_norm_backward_input(Context& ctx, const float* x, const float* dy, const float* mean,
                               const float* invstd, const float* gamma, const float* grad_sums, int64_t n, int64_t c,
                               int64_t plane, float* dx) {
  const int64_t total = n * c * plane;
  if (total == 0) return;
  backward_input_kernel<<<grid_for(total), kThreads, 0, ctx.stream()>>>(x, dy, mean, invstd, gamma, grad_sums, c,
                                                                      plane, total, dx);
  MIRRORED_CUDA_CHECK_LAUNCH("backward_input_kernel");
}

}  // namespace mirrored::kernels::cuda
