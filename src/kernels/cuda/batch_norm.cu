// Batch normalisation in the pieces of kernels.h (sums -> statistics -> apply; backward
// sums -> input gradient), so that sync batch norm can sum across replicas in between.
//
// The reductions split each channel's n * plane elements into a fixed number of
// contiguous parts (a function of the size alone, not of the GPU), one block per (channel,
// part): every thread accumulates its share in double, the block adds the shares in a
// fixed tree, and a second kernel adds a channel's parts in order. That is as exact as the
// CPU's (float lanes per plane, double across planes), keeps every SM busy when channels
// are few, and gives the same bits on every run. The per-element
// kernels repeat the CPU's float expressions with explicit rounding (__fmul_rn and kin), so
// the compiler cannot fuse a multiply and an add into an FMA that the CPU does not do.
#include "cuda_kernels.h"
#include "launch.cuh"
#include "mirrored/core/cuda_check.h"
#include "mirrored/core/error.h"

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

// A channel is split into parts of about this many elements, at most kMaxParts of them.
constexpr int64_t kElementsPerPart = 16384;
constexpr int64_t kMaxParts = 64;

int64_t parts_for(int64_t per_channel) {
  const int64_t parts = (per_channel + kElementsPerPart - 1) / kElementsPerPart;
  return parts < 1 ? 1 : (parts > kMaxParts ? kMaxParts : parts);
}

// The terms of the forward sums: x - shift and its square.
struct ShiftedTerms {
  const float* x;
  const float* shift;
  __device__ void operator()(int64_t ch, int64_t at, double& s1, double& s2) const {
    const float d = __fsub_rn(x[at], shift[ch]);
    s1 += d;
    s2 += __fmul_rn(d, d);
  }
};

// The terms of the backward sums: dy and dy (x - mean).
struct GradientTerms {
  const float* x;
  const float* dy;
  const float* mean;
  __device__ void operator()(int64_t ch, int64_t at, double& s1, double& s2) const {
    const float g = dy[at];
    s1 += g;
    s2 += __fmul_rn(g, __fsub_rn(x[at], mean[ch]));
  }
};

// Block ch * parts + p sums part p of channel ch into partials[ch * parts + p].
template <typename Terms>
__global__ void partial_sums_kernel(Terms terms, int64_t n, int64_t c, int64_t plane, int64_t parts,
                                    double2* partials) {
  const int64_t ch = blockIdx.x / parts, part = blockIdx.x - ch * parts;
  const int64_t per_channel = n * plane, per_part = (per_channel + parts - 1) / parts;
  const int64_t begin = part * per_part;
  const int64_t end = begin + per_part < per_channel ? begin + per_part : per_channel;
  double s1 = 0.0, s2 = 0.0;
  for (int64_t j = begin + threadIdx.x; j < end; j += kReduceThreads) {
    const int64_t b = j / plane, i = j - b * plane;
    terms(ch, (b * c + ch) * plane + i, s1, s2);
  }
  block_sum(s1, s2);
  if (threadIdx.x == 0) partials[blockIdx.x] = make_double2(s1, s2);
}

// out = {sum of the parts' first sums, of their second sums (times scale[ch] when given),
// count}, the parts added in order.
__global__ void combine_parts_kernel(const double2* partials, int64_t c, int64_t parts, float count,
                                     const float* scale, float* out) {
  if (blockIdx.x == 0 && threadIdx.x == 0) out[2 * c] = count;
  MIRRORED_GRID_STRIDE(ch, c) {
    double s1 = 0.0, s2 = 0.0;
    for (int64_t part = 0; part < parts; ++part) {
      const double2 p = partials[ch * parts + part];
      s1 += p.x;
      s2 += p.y;
    }
    out[ch] = static_cast<float>(s1);
    out[c + ch] = static_cast<float>(scale ? s2 * scale[ch] : s2);
  }
}

// Queues both kernels of one reduction into `out` ([2c + 1]).
template <typename Terms>
void reduce_channels(Context& ctx, Terms terms, int64_t n, int64_t c, int64_t plane, const float* scale, float* out,
                     const char* what) {
  const int64_t parts = parts_for(n * plane);
  const int64_t blocks = c * parts;
  MIRRORED_CHECK(blocks <= INT32_MAX, what, ": ", c, " channels exceed the grid");
  std::lock_guard lock(ctx.partials_mutex);
  const size_t bytes = static_cast<size_t>(blocks > 0 ? blocks : 1) * sizeof(double2);
  // Reallocating frees the old buffer, which cudaFree only does once the device is idle.
  if (ctx.partials.bytes() < bytes) ctx.partials = DeviceBuffer(bytes, ctx.device);
  auto* partials = ctx.partials.as<double2>();
  if (blocks > 0) {
    partial_sums_kernel<<<static_cast<unsigned>(blocks), kReduceThreads, 0, ctx.stream()>>>(terms, n, c, plane,
                                                                                             parts, partials);
    MIRRORED_CUDA_CHECK_LAUNCH("partial_sums_kernel");
  }
  combine_parts_kernel<<<grid_for(c), kThreads, 0, ctx.stream()>>>(partials, c, parts, static_cast<float>(n * plane),
                                                                   scale, out);
  MIRRORED_CUDA_CHECK_LAUNCH("combine_parts_kernel");
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

}  // namespace

void batch_norm_sums(Context& ctx, const float* x, const float* shift, int64_t n, int64_t c, int64_t plane,
                     float* sums) {
  // sums = {sum (x - shift), sum (x - shift)^2, count}
  reduce_channels(ctx, ShiftedTerms{x, shift}, n, c, plane, nullptr, sums, "batch_norm_sums");
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
  // grad_sums = {sum dy, invstd * sum dy (x - mean), count}
  reduce_channels(ctx, GradientTerms{x, dy, mean}, n, c, plane, invstd, grad_sums, "batch_norm_backward_sums");
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
