// Max and average pooling over [planes, H, W]. Window bounds are clipped to the input
// once per output, so the inner loops carry no padding tests.
#include <algorithm>
#include <cstring>

#include "cpu_kernels.h"

namespace mirrored::kernels::cpu {

namespace {
// The common 2x2, stride 2, unpadded case: two input rows per output row, no clipping.
void max_pool2x2(const float* x, const PoolShape& s, float* y, int32_t* argmax) {
  const int64_t in_plane = s.h * s.w, out_plane = s.oh * s.ow;
  for (int64_t p = 0; p < s.planes; ++p) {
    const float* in = x + p * in_plane;
    for (int64_t oy = 0; oy < s.oh; ++oy) {
      const float* r0 = in + 2 * oy * s.w;
      const float* r1 = r0 + s.w;
      float* out = y + p * out_plane + oy * s.ow;
      int32_t* arg = argmax + p * out_plane + oy * s.ow;
      const auto base = static_cast<int32_t>(2 * oy * s.w);
      const auto w = static_cast<int32_t>(s.w);
      for (int64_t ox = 0; ox < s.ow; ++ox) {
        const auto c = static_cast<int32_t>(2 * ox);
        // Row-major scan order with strict '>', as the general loop: the first maximum wins.
        // No branches: which element wins is data, and a mispredicted branch costs more
        // than the whole comparison. Written as conditional operators, GCC turned the last
        // choice into a branch (the cnn's first pooling ran at ~12 ns per output); the
        // maxima are std::max, whose (a < b ? b : a) is exactly "b wins when b > a", and the
        // index moves by the 0/1 outcome of the same comparisons.
        const float a = r0[c], b = r0[c + 1], d = r1[c], e = r1[c + 1];
        const auto top_right = static_cast<int32_t>(b > a), bottom_right = static_cast<int32_t>(e > d);
        const float top = std::max(a, b), bottom = std::max(d, e);
        const int32_t top_at = base + c + top_right, bottom_at = base + w + c + bottom_right;
        const auto lower = static_cast<int32_t>(bottom > top);
        out[ox] = std::max(top, bottom);
        arg[ox] = top_at + lower * (bottom_at - top_at);
      }
    }
  }
}
}  // namespace

void max_pool2d_forward(const float* x, const PoolShape& s, float* y, int32_t* argmax) {
  if (s.kh == 2 && s.kw == 2 && s.stride == 2 && s.pad == 0) return max_pool2x2(x, s, y, argmax);
  const int64_t in_plane = s.h * s.w, out_plane = s.oh * s.ow;
  for (int64_t p = 0; p < s.planes; ++p) {
    const float* in = x + p * in_plane;
    float* out = y + p * out_plane;
    int32_t* arg = argmax + p * out_plane;
    for (int64_t oy = 0; oy < s.oh; ++oy) {
      const int64_t y0 = std::max<int64_t>(oy * s.stride - s.pad, 0);
      const int64_t y1 = std::min(oy * s.stride - s.pad + s.kh, s.h);
      for (int64_t ox = 0; ox < s.ow; ++ox) {
        const int64_t x0 = std::max<int64_t>(ox * s.stride - s.pad, 0);
        const int64_t x1 = std::min(ox * s.stride - s.pad + s.kw, s.w);
        int64_t best = y0 * s.w + x0;
        float best_value = in[best];
        for (int64_t iy = y0; iy < y1; ++iy) {
          for (int64_t ix = x0; ix < x1; ++ix) {
            const float v = in[iy * s.w + ix];
            if (v > best_value) {  // strict: the first of equal values wins, as in PyTorch
              best_value = v;
              best = iy * s.w + ix;
            }
          }
        }
        out[oy * s.ow + ox] = best_value;
        arg[oy * s.ow + ox] = static_cast<int32_t>(best);
      }
    }
  }
}

void max_pool2d_backward(const float* dy, const int32_t* argmax, int64_t planes, int64_t in_plane,
                         int64_t out_plane, float* dx) {
  std::memset(dx, 0, static_cast<size_t>(planes * in_plane) * sizeof(float));
  for (int64_t p = 0; p < planes; ++p) {
    float* d = dx + p * in_plane;
    const float* g = dy + p * out_plane;
    const int32_t* arg = argmax + p * out_plane;
    for (int64_t o = 0; o < out_plane; ++o) d[arg[o]] += g[o];
  }
}

void avg_pool2d_forward(const float* x, const PoolShape& s, float* y) {
  const int64_t in_plane = s.h * s.w, out_plane = s.oh * s.ow;
  const float inv = avg_pool_scale(s);
  for (int64_t p = 0; p < s.planes; ++p) {
    const float* in = x + p * in_plane;
    float* out = y + p * out_plane;
    for (int64_t oy = 0; oy < s.oh; ++oy) {
      const int64_t y0 = std::max<int64_t>(oy * s.stride - s.pad, 0);
      const int64_t y1 = std::min(oy * s.stride - s.pad + s.kh, s.h);
      for (int64_t ox = 0; ox < s.ow; ++ox) {
        const int64_t x0 = std::max<int64_t>(ox * s.stride - s.pad, 0);
        const int64_t x1 = std::min(ox * s.stride - s.pad + s.kw, s.w);
        float sum = 0.0f;
        for (int64_t iy = y0; iy < y1; ++iy)
          for (int64_t ix = x0; ix < x1; ++ix) sum += in[iy * s.w + ix];
        out[oy * s.ow + ox] = sum * inv;
      }
    }
  }
}

void avg_pool2d_backward(const float* dy, const PoolShape& s, float* dx) {
  const int64_t in_plane = s.h * s.w, out_plane = s.oh * s.ow;
  const float inv = avg_pool_scale(s);
  std::memset(dx, 0, static_cast<size_t>(s.planes * in_plane) * sizeof(float));
  for (int64_t p = 0; p < s.planes; ++p) {
    float* d = dx + p * in_plane;
    const float* g = dy + p * out_plane;
    for (int64_t oy = 0; oy < s.oh; ++oy) {
      const int64_t y0 = std::max<int64_t>(oy * s.stride - s.pad, 0);
      const int64_t y1 = std::min(oy * s.stride - s.pad + s.kh, s.h);
      for (int64_t ox = 0; ox < s.ow; ++ox) {
        const int64_t x0 = std::max<int64_t>(ox * s.stride - s.pad, 0);
        const int64_t x1 = std::min(ox * s.stride - s.pad + s.kw, s.w);
        const float share = g[oy * s.ow + ox] * inv;
        for (int64_t iy = y0; iy < y1; ++iy)
          for (int64_t ix = x0; ix < x1; ++ix) d[iy * s.w + ix] += share;
      }
    }
  }
}

}  // namespace mirrored::kernels::cpu
