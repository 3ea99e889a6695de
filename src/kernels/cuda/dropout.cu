// Dropout masks on the GPU: element i of global sample k is value i of the counter-based
// stream (seed, k) (core/counter_rng.h), the function the CPU kernel evaluates, so a mask
// is the same bits on either device. One thread per element, no state.
#include "cuda_kernels.h"
#include "launch.cuh"
#include "mirrored/core/counter_rng.h"
#include "mirrored/core/cuda_check.h"

namespace mirrored::kernels::cuda {
namespace {

__global__ void dropout_kernel(const float* x, float p, float keep_scale, uint64_t seed, int64_t first_sample,
                               int64_t sample_numel, int64_t total, float* mask, float* y) {
  MIRRORED_GRID_STRIDE(i, total) {
    const int64_t b = i / sample_numel, e = i - b * sample_numel;
    const uint64_t key = counter_stream_key(seed, static_cast<uint64_t>(first_sample + b));
    const float m = counter_uniform(key, static_cast<uint64_t>(e)) >= p ? keep_scale : 0.0f;
    mask[i] = m;
    y[i] = x[i] * m;
  }
}

}  // namespace

void dropout_forward(Context& ctx, const float* x, float p, uint64_t seed, int64_t first_sample, int64_t n,
                     int64_t sample_numel, float* mask, float* y) {
  const int64_t total = n * sample_numel;
  if (total == 0) return;
  // The scale is worked out on the host by the CPU kernel's function, not re-derived here.
  dropout_kernel<<<grid_for(total), kThreads, 0, ctx.stream()>>>(x, p, dropout_keep_scale(p), seed, first_sample,
                                                               sample_numel, total, mask, y);
  MIRRORED_CUDA_CHECK_LAUNCH("dropout_kernel");
}

}  // namespace mirrored::kernels::cuda
