// A dense layer's bias and GELU in one pass each way (kernels.h: bias_gelu_forward,
// bias_gelu_backward). Forward keeps tanh(u) beside the activation, so backward needs no
// second exponential and division per element: before, GELU's backward recomputed them and
// cost more than its forward. Elementwise along each row; the bias gradient sums the rows
// in order, one column per lane, so every SIMD width gives the same bits.
#include <cstdint>
#include <vector>

#include "cpu_kernels.h"
#include "rounded_blocks.h"
#include "mirrored/kernels/transformer_math.h"
#include "simd_dispatch.h"

namespace mirrored::kernels::cpu {
namespace {

MIRRORED_ALWAYS_INLINE void bias_gelu_forward_rows_body(float* __restrict h, const float* __restrict bias,
                                                        int64_t rows, int64_t cols, float* __restrict th,
                                                        float* __restrict y) {
  for (int64_t i = 0; i < rows; ++i) {
    float* h_row = h + i * cols;
    float* th_row = th + i * cols;
    float* y_row = y + i * cols;
    for (int64_t j = 0; j < cols; ++j) {
      const float x = h_row[j] + bias[j];  // add_bias's sum
      const float t = tanh_approx(gelu_tanh_argument(x));
      h_row[j] = x;
      th_row[j] = t;
      y_row[j] = gelu_from_tanh(x, t);
    }
  }
}

MIRRORED_ALWAYS_INLINE void bias_gelu_backward_rows_body(const float* __restrict x, const float* __restrict th,
                                                         const float* __restrict dy, int64_t rows, int64_t cols,
                                                         float* __restrict dx, float* __restrict column_sums) {
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t row = i * cols;
    for (int64_t j = 0; j < cols; ++j) {
      const float g = dy[row + j] * gelu_derivative_from_tanh(x[row + j], th[row + j]);
      dx[row + j] = g;
      column_sums[j] += g;
    }
  }
}

MIRRORED_SIMD_DISPATCH(bias_gelu_forward_rows,
                       (float* h, const float* bias, int64_t rows, int64_t cols, float* th, float* y),
                       (h, bias, rows, cols, th, y))
MIRRORED_SIMD_DISPATCH(bias_gelu_backward_rows,
                       (const float* x, const float* th, const float* dy, int64_t rows, int64_t cols, float* dx,
                        float* column_sums),
                       (x, th, dy, rows, cols, dx, column_sums))

}  // namespace

void bias_gelu_forward(float* h, const float* bias, int64_t rows, int64_t cols, float* th, float* y) {
  bias_gelu_forward_rows(h, bias, rows, cols, th, y);
}

void bias_gelu_forward_bf16(float* h, const float* bias, int64_t rows, int64_t cols, float* th, uint16_t* y) {
  rounded_in_blocks(rows, cols, y, [&](float* block, int64_t first, int64_t n) {
    bias_gelu_forward_rows(h + first * cols, bias, n, cols, th + first * cols, block);
  });
}

void bias_gelu_backward(const float* x, const float* th, const float* dy, int64_t rows, int64_t cols, float* dx,
                        float* dbias) {
  // The rows' sum first, then added to dbias once: dbias += dy^T 1, as the matrix product
  // that the layer ran before, which also accumulates over micro-batches.
  std::vector<float> column_sums(static_cast<size_t>(cols), 0.0f);
  bias_gelu_backward_rows(x, th, dy, rows, cols, dx, column_sums.data());
  for (int64_t j = 0; j < cols; ++j) dbias[j] += column_sums[j];
}

void bias_gelu_backward_bf16(const float* x, const float* th, const float* dy, int64_t rows, int64_t cols,
                             uint16_t* dx, float* dbias) {
  // The column sums run on across the blocks: the rows are added in the float32 kernel's order.
  std::vector<float> column_sums(static_cast<size_t>(cols), 0.0f);
  rounded_in_blocks(rows, cols, dx, [&](float* block, int64_t first, int64_t n) {
    const int64_t at = first * cols;
    bias_gelu_backward_rows(x + at, th + at, dy + at, n, cols, block, column_sums.data());
  });
  for (int64_t j = 0; j < cols; ++j) dbias[j] += column_sums[j];
}

}  // namespace mirrored::kernels::cpu
