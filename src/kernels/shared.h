#pragma once
// What the CPU and CUDA implementations share: the geometry of the convolution-family ops
// (worked out and checked once, in dispatch_conv.cpp) and the few host-side constants both must
// compute identically.
#include <cstdint>

namespace mirrored::kernels {

// The full geometry of one convolution (input, weight and output extents).
struct ConvShape {
  int64_t n = 0, c = 0, h = 0, w = 0;  // input
  int64_t oc = 0, kh = 0, kw = 0;      // weight [oc, c, kh, kw]
  int64_t stride = 1, pad = 0;
  int64_t oh = 0, ow = 0;              // output
};

// Pooling over [planes, h, w] (planes = N * C), window kh x kw.
struct PoolShape {
  int64_t planes = 0, h = 0, w = 0;
  int64_t kh = 2, kw = 2, stride = 2, pad = 0;
  int64_t oh = 0, ow = 0;
};

// The factor of every average-pooling window: padded zeros count (count_include_pad).
inline float avg_pool_scale(const PoolShape& s) { return 1.0f / static_cast<float>(s.kh * s.kw); }

// The value of a kept element of a dropout mask, 1 / (1 - p).
inline float dropout_keep_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

}  // namespace mirrored::kernels
