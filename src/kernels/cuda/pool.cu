// Max and average pooling, one thread per output (forward) or per input element
// (backward). Backward gathers instead of scattering: an input element visits the windows
// that cover it in output order and sums their gradients, which is the order in which the
// CPU kernels add them. So overlapping windows need no atomics, the result is the same on
// every run, and it equals the CPU's bit for bit (products kept apart from sums with
// __fmul_rn, so the compiler cannot fuse them into an FMA that the CPU does not do).
#include "cuda_kernels.h"
#include "launch.cuh"
#include "mirrored/core/cuda_check.h"

namespace mirrored::kernels::cuda {
namespace {

__device__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
__device__ int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

// The window of output (oy, ox), clipped to the input: rows [y0, y1), columns [x0, x1).
struct Window {
  int64_t y0, y1, x0, x1;
};
__device__ Window window_of(const PoolShape& s, int64_t oy, int64_t ox) {
  const int64_t top = oy * s.stride - s.pad, left = ox * s.stride - s.pad;
  return {max64(top, 0), min64(top + s.kh, s.h), max64(left, 0), min64(left + s.kw, s.w)};
}

// The outputs [lo, hi] along one dimension whose windows cover input coordinate `at`:
// o * stride - pad <= at < o * stride - pad + kernel. Empty when lo > hi.
__device__ void covering(int64_t at, int64_t kernel, int64_t stride, int64_t pad, int64_t out, int64_t& lo,
                         int64_t& hi) {
  const int64_t first = at + pad - kernel + 1;  // need o * stride >= first
  lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  hi = min64((at + pad) / stride, out - 1);
}

__global__ void max_pool_forward_kernel(const float* x, PoolShape s, float* y, int32_t* argmax) {
  const int64_t out_plane = s.oh * s.ow;
  MIRRORED_GRID_STRIDE(i, s.planes * out_plane) {
    const int64_t p = i / out_plane, o = i - p * out_plane, oy = o / s.ow, ox = o - oy * s.ow;
    const float* in = x + p * s.h * s.w;
    const Window win = window_of(s, oy, ox);
    // Row-major scan from the window's first real element with a strict '>': padding never
    // wins and the first of equal values does (the CPU kernel's loop).
    int64_t best = win.y0 * s.w + win.x0;
    float best_value = in[best];
    for (int64_t iy = win.y0; iy < win.y1; ++iy) {
      for (int64_t ix = win.x0; ix < win.x1; ++ix) {
        const float v = in[iy * s.w + ix];
        if (v > best_value) {
          best_value = v;
          best = iy * s.w + ix;
        }
      }
    }
    y[i] = best_value;
    argmax[i] = static_cast<int32_t>(best);
  }
}

__global__ void max_pool_backward_kernel(const float* dy, const int32_t* argmax, PoolShape s, float* dx) {
  const int64_t in_plane = s.h * s.w, out_plane = s.oh * s.ow;
  MIRRORED_GRID_STRIDE(i, s.planes * in_plane) {
    const int64_t p = i / in_plane, e = i - p * in_plane, iy = e / s.w, ix = e - iy * s.w;
    const float* g = dy + p * out_plane;
    const int32_t* arg = argmax + p * out_plane;
    int64_t oy0, oy1, ox0, ox1;
    covering(iy, s.kh, s.stride, s.pad, s.oh, oy0, oy1);
    covering(ix, s.kw, s.stride, s.pad, s.ow, ox0, ox1);
    float sum = 0.0f;
    for (int64_t oy = oy0; oy <= oy1; ++oy)
      for (int64_t ox = ox0; ox <= ox1; ++ox) {
        const int64_t o = oy * s.ow + ox;
        if (arg[o] == e) sum += g[o];
      }
    dx[i] = sum;
  }
}

__global__ void avg_pool_forward_kernel(const float* x, PoolShape s, float scale, float* y) {
  const int64_t out_plane = s.oh * s.ow;
  MIRRORED_GRID_STRIDE(i, s.planes * out_plane) {
    const int64_t p = i / out_plane, o = i - p * out_plane, oy = o / s.ow, ox = o - oy * s.ow;
    const float* in = x + p * s.h * s.w;
    const Window win = window_of(s, oy, ox);
    float sum = 0.0f;
    for (int64_t iy = win.y0; iy < win.y1; ++iy)
      for (int64_t ix = win.x0; ix < win.x1; ++ix) sum += in[iy * s.w + ix];
    y[i] = sum * scale;
  }
}

__global__ void avg_pool_backward_kernel(const float* dy, PoolShape s, float scale, float* dx) {
  const int64_t in_plane = s.h * s.w, out_plane = s.oh * s.ow;
  MIRRORED_GRID_STRIDE(i, s.planes * in_plane) {
    const int64_t p = i / in_plane, e = i - p * in_plane, iy = e / s.w, ix = e - iy * s.w;
    const float* g = dy + p * out_plane;
    int64_t oy0, oy1, ox0, ox1;
    covering(iy, s.kh, s.stride, s.pad, s.oh, oy0, oy1);
    covering(ix, s.kw, s.stride, s.pad, s.ow, ox0, ox1);
    float sum = 0.0f;
    for (int64_t oy = oy0; oy <= oy1; ++oy)
      for (int64_t ox = ox0; ox <= ox1; ++ox) sum += __fmul_rn(g[oy * s.ow + ox], scale);
    dx[i] = sum;
  }
}

}  // namespace

void max_pool2d_forward(Context& ctx, const float* x, const PoolShape& s, float* y, int32_t* argmax) {
  const int64_t n = s.planes * s.oh * s.ow;
  if (n == 0) return;
  max_pool_forward_kernel<<<grid_for(n), kThreads, 0, ctx.stream()>>>(x, s, y, argmax);
  MIRRORED_CUDA_CHECK_LAUNCH("max_pool_forward_kernel");
}

void max_pool2d_backward(Context& ctx, const float* dy, const int32_t* argmax, const PoolShape& s, float* dx) {
  const int64_t n = s.planes * s.h * s.w;
  if (n == 0) return;
  max_pool_backward_kernel<<<grid_for(n), kThreads, 0, ctx.stream()>>>(dy, argmax, s, dx);
  MIRRORED_CUDA_CHECK_LAUNCH("max_pool_backward_kernel");
}

void avg_pool2d_forward(Context& ctx, const float* x, const PoolShape& s, float* y) {
  const int64_t n = s.planes * s.oh * s.ow;
  if (n == 0) return;
  avg_pool_forward_kernel<<<grid_for(n), kThreads, 0, ctx.stream()>>>(x, s, avg_pool_scale(s), y);
  MIRRORED_CUDA_CHECK_LAUNCH("avg_pool_forward_kernel");
}

void avg_pool2d_backward(Context& ctx, const float* dy, const PoolShape& s, float* dx) {
  const int64_t n = s.planes * s.h * s.w;
  if (n == 0) return;
  avg_pool_backward_kernel<<<grid_for(n), kThreads, 0, ctx.stream()>>>(dy, s, avg_pool_scale(s), dx);
  MIRRORED_CUDA_CHECK_LAUNCH("avg_pool_backward_kernel");
}

}  // namespace mirrored::kernels::cuda
