// Batch normalisation over [n, c, plane]. Per-plane sums (batch_norm_planes.h) are added
// across planes in double: the result is exact enough that a batch split over replicas and
// summed gives the statistics of the whole batch to float precision.
#include <cmath>
#include <vector>

#include "batch_norm_planes.h"
#include "cpu_kernels.h"

namespace mirrored::kernels::cpu {
using bn_plane::lane_sum;

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
      const int64_t at = (b * c + ch) * plane;
      bn_plane::apply(x + at, bn_plane::affine(mean[ch], invstd[ch], gamma[ch], beta[ch]), plane, y + at);
    }
  }
}

void batch_norm_backward_sums(const float* x, const float* dy, const float* mean, const float* invstd, int64_t n,
                              int64_t c, int64_t plane, float* grad_sums) {
  std::vector<double> s1(static_cast<size_t>(c), 0.0), s2(static_cast<size_t>(c), 0.0);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const int64_t at = (b * c + ch) * plane;
      const bn_plane::GradSums sums = bn_plane::grad_sums(x + at, dy + at, mean[ch], plane);
      s1[ch] += sums.dy;
      s2[ch] += sums.dy_centred;
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
      const int64_t at = (b * c + ch) * plane;
      bn_plane::input_grad_plane(
          x + at, dy + at, bn_plane::input_grad(mean[ch], invstd[ch], gamma[ch], grad_sums[ch], grad_sums[c + ch], count),
          plane, dx + at);
    }
  }
}

}  // namespace mirrored::kernels::cpu
