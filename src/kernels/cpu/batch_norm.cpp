// Batch normalisation over [n, c, plane]. Per-plane sums run in float with several
// independent accumulators (so the compiler can vectorise them without -ffast-math) and
// are added across planes in double: the result is exact enough that a batch split over
// replicas and summed gives the statistics of the whole batch to float precision.
#include <cmath>
#include <vector>

#include "cpu_kernels.h"

namespace mirrored::kernels::cpu {
namespace {

constexpr int kLanes = 16;

// sum of f(i) for i in [0, n), in kLanes interleaved float accumulators.
template <typename F>
float lane_sum(int64_t n, F f) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += f(i + l);
  float tail = 0.0f;
  for (; i < n; ++i) tail += f(i);
  float total = tail;
  for (int l = 0; l < kLanes; ++l) total += acc[l];
  return total;
}

}  // namespace

// The per-plane sums are added into each channel's double in batch order, as they always
// were; the loops run sample by sample so that the data streams through memory in order
// rather than jumping a whole sample ahead for every plane of a channel.
void batch_norm_sums(const float* x, const float* shift, int64_t n, int64_t c, int64_t plane, float* sums) {
  std::vector<double> s1(static_cast<size_t>(c), 0.0), s2(static_cast<size_t>(c), 0.0);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const float sh = shift[ch];
      const float* p = x + (b * c + ch) * plane;
      s1[ch] += lane_sum(plane, [&](int64_t i) { return p[i] - sh; });
      s2[ch] += lane_sum(plane, [&](int64_t i) {
        const float d = p[i] - sh;
        return d * d;
      });
    }
  }
  for (int64_t ch = 0; ch < c; ++ch) {
    sums[ch] = static_cast<float>(s1[ch]);
    sums[c + ch] = static_cast<float>(s2[ch]);
  }
  sums[2 * c] = static_cast<float>(n * plane);
}

void batch_norm_statistics(const float* sums, const float* shift, int64_t c, float eps, float momentum,
                           float* mean, float* invstd, float* running_mean, float* running_var) {
  const double count = sums[2 * c];
  for (int64_t ch = 0; ch < c; ++ch) {
    const double d_mean = sums[ch] / count;  // mean - shift
    const double var = std::max(sums[c + ch] / count - d_mean * d_mean, 0.0);
    const double m = shift[ch] + d_mean;
    mean[ch] = static_cast<float>(m);
    invstd[ch] = static_cast<float>(1.0 / std::sqrt(var + eps));
    const double unbiased = count > 1 ? var * count / (count - 1) : var;
    running_mean[ch] = static_cast<float>((1.0 - momentum) * running_mean[ch] + momentum * m);
    running_var[ch] = static_cast<float>((1.0 - momentum) * running_var[ch] + momentum * unbiased);
  }
}

void batch_norm_inference_statistics(const float* running_mean, const float* running_var, int64_t c, float eps,
                                     float* mean, float* invstd) {
  for (int64_t ch = 0; ch < c; ++ch) {
    mean[ch] = running_mean[ch];
    invstd[ch] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(running_var[ch]) + eps));
  }
}

void batch_norm_apply(const float* x, const float* mean, const float* invstd, const float* gamma,
                      const float* beta, int64_t n, int64_t c, int64_t plane, float* y) {
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const float scale = invstd[ch] * gamma[ch];
      const float offset = beta[ch] - mean[ch] * scale;
      const float* p = x + (b * c + ch) * plane;
      float* q = y + (b * c + ch) * plane;
      for (int64_t i = 0; i < plane; ++i) q[i] = p[i] * scale + offset;
    }
  }
}

void batch_norm_backward_sums(const float* x, const float* dy, const float* mean, const float* invstd, int64_t n,
                              int64_t c, int64_t plane, float* grad_sums) {
  std::vector<double> s1(static_cast<size_t>(c), 0.0), s2(static_cast<size_t>(c), 0.0);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const float m = mean[ch];
      const float* p = x + (b * c + ch) * plane;
      const float* g = dy + (b * c + ch) * plane;
      s1[ch] += lane_sum(plane, [&](int64_t i) { return g[i]; });
      s2[ch] += lane_sum(plane, [&](int64_t i) { return g[i] * (p[i] - m); });
    }
  }
  for (int64_t ch = 0; ch < c; ++ch) {
    grad_sums[ch] = static_cast<float>(s1[ch]);
    grad_sums[c + ch] = static_cast<float>(s2[ch] * invstd[ch]);
  }
  grad_sums[2 * c] = static_cast<float>(n * plane);
}

void batch_norm_backward_input(const float* x, const float* dy, const float* mean, const float* invstd,
                               const float* gamma, const float* grad_sums, int64_t n, int64_t c, int64_t plane,
                               float* dx) {
  const float count = grad_sums[2 * c];
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const float g = gamma[ch] * invstd[ch];
      const float mean_dy = grad_sums[ch] / count;
      // xhat * mean(dy xhat) = (x - mean) * invstd * mean(dy xhat)
      const float k = invstd[ch] * grad_sums[c + ch] / count;
      const float m = mean[ch];
      const float* p = x + (b * c + ch) * plane;
      const float* d = dy + (b * c + ch) * plane;
      float* q = dx + (b * c + ch) * plane;
      for (int64_t i = 0; i < plane; ++i) q[i] = g * (d[i] - mean_dy - (p[i] - m) * k);
    }
  }
}

}  // namespace mirrored::kernels::cpu
