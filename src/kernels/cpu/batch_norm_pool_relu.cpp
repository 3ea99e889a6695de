// Batch norm, a 2x2 max pool and relu in one pass each way, plane by plane (kernels.h:
// batch_norm_max_pool_relu_*). Apart, the three layers move the full-size tensor through
// memory five times forward (normalised out, pooled in) and seven times backward (the
// pool's scattered gradient out, then read by both batch-norm passes); here the full-size
// planes live in one L1-sized buffer and only the batch norm's input and the pooled tensors
// travel. Each plane goes through the very functions the layers run (batch_norm_planes.h,
// max_pool2x2.h, relu_forward and relu_backward) in their order, so the bits are theirs.
#include <cstring>
#include <vector>

#include "batch_norm_planes.h"
#include "cpu_kernels.h"
#include "max_pool2x2.h"

namespace mirrored::kernels::cpu {
namespace {

// The gradient the pool hands batch norm for one plane: relu's gradient of the pooled
// values, then max_pool2d_backward's scatter (zeros, then += at each maximum).
void scatter_plane_gradient(const float* y, const float* dy, const int32_t* argmax, int64_t plane,
                            int64_t out_plane, float* pooled_grad, float* grad) {
  relu_backward(y, dy, pooled_grad, out_plane);
  std::memset(grad, 0, static_cast<size_t>(plane) * sizeof(float));
  for (int64_t o = 0; o < out_plane; ++o) grad[argmax[o]] += pooled_grad[o];
}

}  // namespace

void batch_norm_max_pool_relu_forward(const float* x, const float* mean, const float* invstd, const float* gamma,
                                      const float* beta, const NormPoolShape& s, float* y, int32_t* argmax) {
  const int64_t plane = s.h * s.w, out_plane = s.oh() * s.ow();
  const auto w = static_cast<int32_t>(s.w), ow = static_cast<int32_t>(s.ow());
  std::vector<float> normalised(static_cast<size_t>(plane));
  for (int64_t b = 0; b < s.n; ++b) {
    for (int64_t ch = 0; ch < s.c; ++ch) {
      const int64_t p = b * s.c + ch;
      bn_plane::apply(x + p * plane, bn_plane::affine(mean[ch], invstd[ch], gamma[ch], beta[ch]), plane,
                      normalised.data());
      float* out = y + p * out_plane;
      for (int64_t oy = 0; oy < s.oh(); ++oy) {
        const float* r0 = normalised.data() + 2 * oy * s.w;
        max_pool2x2_row(r0, r0 + s.w, static_cast<int32_t>(2 * oy * s.w), w, ow, out + oy * s.ow(),
                        argmax + p * out_plane + oy * s.ow());
      }
      relu_forward(out, out, out_plane);
    }
  }
}

void batch_norm_max_pool_relu_backward_sums(const float* x, const float* y, const float* dy, const int32_t* argmax,
                                            const float* mean, const float* invstd, const NormPoolShape& s,
                                            float* grad_sums) {
  const int64_t plane = s.h * s.w, out_plane = s.oh() * s.ow();
  std::vector<float> grad(static_cast<size_t>(plane)), pooled_grad(static_cast<size_t>(out_plane));
  std::vector<double> s1(static_cast<size_t>(s.c), 0.0), s2(static_cast<size_t>(s.c), 0.0);
  for (int64_t b = 0; b < s.n; ++b) {
    for (int64_t ch = 0; ch < s.c; ++ch) {
      const int64_t p = b * s.c + ch, o = p * out_plane;
      scatter_plane_gradient(y + o, dy + o, argmax + o, plane, out_plane, pooled_grad.data(), grad.data());
      const bn_plane::GradSums sums = bn_plane::grad_sums(x + p * plane, grad.data(), mean[ch], plane);
      s1[ch] += sums.dy;
      s2[ch] += sums.dy_centred;
    }
  }
  for (int64_t ch = 0; ch < s.c; ++ch) {
    grad_sums[ch] = static_cast<float>(s1[ch]);
    grad_sums[s.c + ch] = static_cast<float>(s2[ch] * invstd[ch]);
  }
  grad_sums[2 * s.c] = static_cast<float>(s.n * plane);
}

void batch_norm_max_pool_relu_backward_input(const float* x, const float* y, const float* dy, const int32_t* argmax,
                                             const float* mean, const float* invstd, const float* gamma,
                                             const float* grad_sums, const NormPoolShape& s, float* dx) {
  const int64_t plane = s.h * s.w, out_plane = s.oh() * s.ow();
  const float count = grad_sums[2 * s.c];
  std::vector<float> grad(static_cast<size_t>(plane)), pooled_grad(static_cast<size_t>(out_plane));
  for (int64_t b = 0; b < s.n; ++b) {
    for (int64_t ch = 0; ch < s.c; ++ch) {
      const int64_t p = b * s.c + ch, o = p * out_plane;
      scatter_plane_gradient(y + o, dy + o, argmax + o, plane, out_plane, pooled_grad.data(), grad.data());
      bn_plane::input_grad_plane(
          x + p * plane, grad.data(),
          bn_plane::input_grad(mean[ch], invstd[ch], gamma[ch], grad_sums[ch], grad_sums[s.c + ch], count), plane,
          dx + p * plane);
    }
  }
}

}  // namespace mirrored::kernels::cpu
