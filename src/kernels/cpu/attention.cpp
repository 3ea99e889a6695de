// Causal self-attention on the CPU as batched matrix products: for every (batch, head) the
// scores, the weighted values and the four backward products are single sgemm calls that
// read q, k and v in place inside qkv [B, T, 3C] (row stride 3C), so nothing is copied or
// permuted; only the causal softmax and its backward are loops here.
#include <algorithm>
#include <cmath>

#include "cpu_kernels.h"

namespace mirrored::kernels::cpu {
namespace {

// probs[t, :] = softmax over j <= t of scores[t, j]; zero above the diagonal. In place.
void causal_softmax_rows(float* p, int64_t t_len) {
  for (int64_t t = 0; t < t_len; ++t) {
    float* row = p + t * t_len;
    float max = row[0];
    for (int64_t j = 1; j <= t; ++j) max = std::max(max, row[j]);
    float sum = 0.0f;
    for (int64_t j = 0; j <= t; ++j) {
      row[j] = std::exp(row[j] - max);
      sum += row[j];
    }
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j <= t; ++j) row[j] *= inv;
    for (int64_t j = t + 1; j < t_len; ++j) row[j] = 0.0f;
  }
}

// ds = p * (dp - sum_j p dp) per row (the softmax's Jacobian), in place in dp.
void causal_softmax_backward_rows(const float* p, float* dp, int64_t t_len) {
  for (int64_t t = 0; t < t_len; ++t) {
    const float* prow = p + t * t_len;
    float* row = dp + t * t_len;
    float dot = 0.0f;
    for (int64_t j = 0; j <= t; ++j) dot += prow[j] * row[j];
    for (int64_t j = 0; j <= t; ++j) row[j] = prow[j] * (row[j] - dot);
    for (int64_t j = t + 1; j < t_len; ++j) row[j] = 0.0f;
  }
}

}  // namespace

void attention_forward(const float* qkv, int64_t b_len, int64_t t_len, int64_t c, int64_t heads, float* out,
                       float* probs) {
  const int64_t hs = c / heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (int64_t b = 0; b < b_len; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      const float* q = qkv + b * t_len * 3 * c + h * hs;
      const float* k = q + c;
      const float* v = q + 2 * c;
      float* p = probs + (b * heads + h) * t_len * t_len;
      gemm(false, true, t_len, t_len, hs, scale, q, 3 * c, k, 3 * c, 0.0f, p, t_len);  // q k^T / sqrt(hs)
      causal_softmax_rows(p, t_len);
      gemm(false, false, t_len, hs, t_len, 1.0f, p, t_len, v, 3 * c, 0.0f, out + b * t_len * c + h * hs, c);
    }
  }
}

void attention_backward(const float* qkv, const float* probs, const float* dout, int64_t b_len, int64_t t_len,
                        int64_t c, int64_t heads, float* dqkv, float* dscores) {
  const int64_t hs = c / heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (int64_t b = 0; b < b_len; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t offset = b * t_len * 3 * c + h * hs;
      const float* q = qkv + offset;
      const float* k = q + c;
      const float* v = q + 2 * c;
      float* dq = dqkv + offset;
      float* dk = dq + c;
      float* dv = dq + 2 * c;
      const float* p = probs + (b * heads + h) * t_len * t_len;
      const float* dy = dout + b * t_len * c + h * hs;
      gemm(false, true, t_len, t_len, hs, 1.0f, dy, c, v, 3 * c, 0.0f, dscores, t_len);  // dp = dy v^T
      gemm(true, false, t_len, hs, t_len, 1.0f, p, t_len, dy, c, 0.0f, dv, 3 * c);         // dv = p^T dy
      causal_softmax_backward_rows(p, dscores, t_len);
      gemm(false, false, t_len, hs, t_len, scale, dscores, t_len, k, 3 * c, 0.0f, dq, 3 * c);  // dq = ds k
      gemm(true, false, t_len, hs, t_len, scale, dscores, t_len, q, 3 * c, 0.0f, dk, 3 * c);   // dk = ds^T q
    }
  }
}

}  // namespace mirrored::kernels::cpu
