// Dropout masks from counter-based streams: sample k of the global batch always draws
// from Rng(seed, k), whichever replica holds it and however the batch was split.
#include "cpu_kernels.h"
#include "mirrored/core/rng.h"

namespace mirrored::kernels::cpu {

void dropout_forward(const float* x, float p, uint64_t seed, int64_t first_sample, int64_t n,
                     int64_t sample_numel, float* mask, float* y) {
  const float keep_scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  for (int64_t b = 0; b < n; ++b) {
    Rng rng(seed, static_cast<uint64_t>(first_sample + b));
    float* m = mask + b * sample_numel;
    for (int64_t i = 0; i < sample_numel; ++i) m[i] = rng.uniform() >= p ? keep_scale : 0.0f;
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
