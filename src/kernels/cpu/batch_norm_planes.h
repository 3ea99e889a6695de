#pragma once
// Batch normalisation's work on one [H, W] plane of one channel of one sample, shared by
// the layer's own kernels (batch_norm.cpp) and the one that also pools and applies relu
// (batch_norm_pool_relu.cpp), so both give the same bits by construction. Per-plane sums
// run in float with several independent accumulators (so the compiler can vectorise them
// without -ffast-math); callers add them across planes in double.
#include <cstdint>

namespace mirrored::kernels::cpu::bn_plane {

constexpr int kLanes = 16;

// sum of f(i) for i in [0, n), in kLanes interleaved float accumulators.
template <typename F>
inline float lane_sum(int64_t n, F f) {
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

// y = x * scale + offset with scale = invstd gamma and offset = beta - mean scale.
struct Affine {
  float scale, offset;
};
inline Affine affine(float mean, float invstd, float gamma, float beta) {
  const float scale = invstd * gamma;
  return {scale, beta - mean * scale};
}
inline void apply(const float* x, Affine a, int64_t plane, float* y) {
  for (int64_t i = 0; i < plane; ++i) y[i] = x[i] * a.scale + a.offset;
}

// {sum dy, sum dy (x - mean)} of one plane.
struct GradSums {
  float dy, dy_centred;
};
inline GradSums grad_sums(const float* x, const float* dy, float mean, int64_t plane) {
  return {lane_sum(plane, [&](int64_t i) { return dy[i]; }),
          lane_sum(plane, [&](int64_t i) { return dy[i] * (x[i] - mean); })};
}

// dx = g (dy - mean_dy - (x - mean) k), g = gamma invstd, k = invstd mean(dy xhat).
struct InputGrad {
  float g, mean_dy, k, mean;
};
inline InputGrad input_grad(float mean, float invstd, float gamma, float dy_sum, float dy_xhat_sum, float count) {
  // xhat * mean(dy xhat) = (x - mean) * invstd * mean(dy xhat)
  return {gamma * invstd, dy_sum / count, invstd * dy_xhat_sum / count, mean};
}
inline void input_grad_plane(const float* x, const float* dy, InputGrad c, int64_t plane, float* dx) {
  for (int64_t i = 0; i < plane; ++i) dx[i] = c.g * (dy[i] - c.mean_dy - (x[i] - c.mean) * c.k);
}

}  // namespace mirrored::kernels::cpu::bn_plane
