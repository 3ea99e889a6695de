// CPU kernels of the transformer's token-wise ops: embeddings, layer norm, GELU. Rows are
// independent and short (C channels), so each loop walks one row at a time, contiguously.
#include <cmath>
#include <cstring>

#include "mirrored/kernels/transformer_math.h"
#include "simd_dispatch.h"
#include "cpu_kernels.h"
#include "mirrored/core/error.h"

namespace mirrored::kernels::cpu {

void embedding_forward(const int32_t* tokens, const float* wte, const float* wpe, int64_t batch,
                       int64_t tokens_per_row, int64_t vocab, int64_t c, float* out) {
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < tokens_per_row; ++t) {
      const int64_t n = b * tokens_per_row + t;
      const int32_t token = tokens[n];
      MIRRORED_CHECK(token >= 0 && token < vocab, "embedding: token id ", token, " at [", b, ", ", t,
                     "] outside the vocabulary [0, ", vocab, ")");
      const float* token_row = wte + token * c;
      const float* position_row = wpe + t * c;
      float* row = out + n * c;
      for (int64_t j = 0; j < c; ++j) row[j] = token_row[j] + position_row[j];
    }
  }
}

void embedding_backward(const int32_t* tokens, const float* dout, int64_t batch, int64_t tokens_per_row,
                        int64_t vocab, int64_t c, float* dwte, float* dwpe) {
  // Tokens in (b, t) order, one add at a time: the order the CUDA kernel keeps per row.
  for (int64_t n = 0; n < batch * tokens_per_row; ++n) {
    const int32_t token = tokens[n];
    MIRRORED_CHECK(token >= 0 && token < vocab, "embedding backward: token id ", token, " outside [0, ", vocab,
                   ")");
    float* grad_row = dwte + token * c;
    const float* row = dout + n * c;
    for (int64_t j = 0; j < c; ++j) grad_row[j] += row[j];
  }
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < tokens_per_row; ++t) {
      float* grad_row = dwpe + t * c;
      const float* row = dout + (b * tokens_per_row + t) * c;
      for (int64_t j = 0; j < c; ++j) grad_row[j] += row[j];
    }
  }
}

namespace {

// Row sums in kLanes interleaved partial sums, added lane by lane at the end: a fixed order
// (the same in every clone of simd_dispatch.h) that keeps the partial sums in one vector
// register, where one running sum would make every add wait for the previous one.
template <int64_t kLanes>
MIRRORED_ALWAYS_INLINE float add_lanes(const float* lanes) {
  float sum = 0.0f;
  for (int64_t l = 0; l < kLanes; ++l) sum += lanes[l];
  return sum;
}

MIRRORED_ALWAYS_INLINE void layer_norm_forward_body(const float* x, const float* gamma, const float* beta, float eps,
                                                    int64_t rows, int64_t c, float* y, float* mean, float* rstd) {
  constexpr int64_t kLanes = 16;
  const float inv_c = 1.0f / static_cast<float>(c);
  const int64_t c_lanes = c - c % kLanes;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * c;
    float lanes[kLanes] = {};
    for (int64_t j = 0; j < c_lanes; j += kLanes)
      for (int64_t l = 0; l < kLanes; ++l) lanes[l] += row[j + l];
    float sum = add_lanes<kLanes>(lanes);
    for (int64_t j = c_lanes; j < c; ++j) sum += row[j];
    const float m = sum * inv_c;
    // Two passes: the variance of centred values does not cancel when the mean is large.
    float sq_lanes[kLanes] = {};
    for (int64_t j = 0; j < c_lanes; j += kLanes)
      for (int64_t l = 0; l < kLanes; ++l) {
        const float d = row[j + l] - m;
        sq_lanes[l] += d * d;
      }
    float sq = add_lanes<kLanes>(sq_lanes);
    for (int64_t j = c_lanes; j < c; ++j) {
      const float d = row[j] - m;
      sq += d * d;
    }
    const float s = 1.0f / std::sqrt(sq * inv_c + eps);
    float* out = y + r * c;
    for (int64_t j = 0; j < c; ++j) out[j] = (row[j] - m) * s * gamma[j] + beta[j];
    mean[r] = m;
    rstd[r] = s;
  }
}

// One pass with running sums, as it was: interleaved partial sums, as in the forward,
// measured slower here, where the row's loop also updates dgamma and dbeta.
MIRRORED_ALWAYS_INLINE void layer_norm_backward_body(const float* x, const float* dy, const float* gamma,
                                                     const float* mean, const float* rstd, int64_t rows, int64_t c,
                                                     float* dx, float* dgamma, float* dbeta) {
  const float inv_c = 1.0f / static_cast<float>(c);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * c;
    const float* g = dy + r * c;
    const float m = mean[r];
    const float s = rstd[r];
    float sum_dg = 0.0f, sum_dg_xhat = 0.0f;
    for (int64_t j = 0; j < c; ++j) {
      const float xhat = (xr[j] - m) * s;
      const float dg = g[j] * gamma[j];
      sum_dg += dg;
      sum_dg_xhat += dg * xhat;
      dgamma[j] += g[j] * xhat;
      dbeta[j] += g[j];
    }
    const float mean_dg = sum_dg * inv_c;
    const float mean_dg_xhat = sum_dg_xhat * inv_c;
    float* out = dx + r * c;
    for (int64_t j = 0; j < c; ++j) {
      const float xhat = (xr[j] - m) * s;
      out[j] = s * (g[j] * gamma[j] - mean_dg - xhat * mean_dg_xhat);
    }
  }
}

}  // namespace

MIRRORED_SIMD_DISPATCH(layer_norm_forward,
                       (const float* x, const float* gamma, const float* beta, float eps, int64_t rows, int64_t c,
                        float* y, float* mean, float* rstd),
                       (x, gamma, beta, eps, rows, c, y, mean, rstd))
MIRRORED_SIMD_DISPATCH(layer_norm_backward,
                       (const float* x, const float* dy, const float* gamma, const float* mean, const float* rstd,
                        int64_t rows, int64_t c, float* dx, float* dgamma, float* dbeta),
                       (x, dy, gamma, mean, rstd, rows, c, dx, dgamma, dbeta))

namespace {
MIRRORED_ALWAYS_INLINE void gelu_forward_body(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = gelu(x[i]);
}
MIRRORED_ALWAYS_INLINE void gelu_backward_body(const float* x, const float* dy, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * gelu_derivative(x[i]);
}
}  // namespace

// GELU is arithmetic-bound (tanh_approx vectorises): the wider the vectors, the faster.
MIRRORED_SIMD_DISPATCH(gelu_forward, (const float* x, float* y, int64_t n), (x, y, n))
MIRRORED_SIMD_DISPATCH(gelu_backward, (const float* x, const float* dy, float* dx, int64_t n), (x, dy, dx, n))

}  // namespace mirrored::kernels::cpu
