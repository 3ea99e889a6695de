// Dropout masks from counter-based streams: element i of sample k of the global batch is
// always value i of stream (seed, k), whichever replica holds the sample, however the
// batch was split, and whichever device draws it (cuda/dropout.cu draws the same bits).
#include "cpu_kernels.h"
#include "mirrored/core/counter_rng.h"

namespace mirrored::kernels::cpu {

void dropout_forward(const float* x, float p, uint64_t seed, int64_t first_sample, int64_t n,
                     int64_t sample_numel, float* mask, float* y) {
  const float keep_scale = dropout_keep_scale(p);
  for (int64_t b = 0; b < n; ++b) {
    const uint64_t key = counter_stream_key(seed, static_cast<uint64_t>(first_sample + b));
    float* m = mask + b * sample_numel;
    for (int64_t i = 0; i < sample_numel; ++i)
      m[i] = counter_uniform(key, static_cast<uint64_t>(i)) >= p ? keep_scale : 0.0f;
  }
  multiply(x, mask, y, n * sample_numel);
}

void multiply(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}

void add(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

}  // namespace mirrored::kernels::cpu
