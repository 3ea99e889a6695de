// Max and average pooling over [planes, H, W]. Window bounds are clipped to the input
// once per output, so the inner loops carry no padding tests.
#include <algorithm>
#include <cstring>

#include "cpu_kernels.h"
#include "max_pool2x2.h"

namespace mirrored::kernels::cpu {

namespace {
void max_pool2x2(const float* x, const PoolShape& s, float* y, int32_t* argmax) {
  const int64_t in_plane = s.h * s.w, out_plane = s.oh * s.ow;
  const auto w = static_cast<int32_t>(s.w), ow = static_cast<int32_t>(s.ow);
  for (int64_t p = 0; p < s.planes; ++p) {
    const float* in = x + p * in_plane;
    for (int64_t oy = 0; oy < s.oh; ++oy) {
      const float* r0 = in + 2 * oy * s.w;
      max_pool2x2_row(r0, r0 + s.w, static_cast<int32_t>(2 * oy * s.w), w, ow, y + p * out_plane + oy * s.ow,
                      argmax + p * out_plane + oy * s.ow);
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
  // Plane by plane, zeroing each just before its scatter, so the scatter's read-modify-
  // writes find the plane in L1 rather than after a memset of the whole batch.
  for (int64_t p = 0; p < planes; ++p) {
    float* d = dx + p * in_plane;
    const float* g = dy + p * out_plane;
    const int32_t* arg = argmax + p * out_plane;
    std::memset(d, 0, static_cast<size_t>(in_plane) * sizeof(float));
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
