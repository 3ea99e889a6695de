// CPU kernels of the transformer's token-wise ops: embeddings, layer norm, GELU. Rows are
// independent and short (C channels), so each loop walks one row at a time, contiguously.
#include <cmath>
#include <cstring>
#include <vector>

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

// One row of layer_norm_forward: y, and the row's mean and rstd.
MIRRORED_ALWAYS_INLINE void layer_norm_row(const float* row, const float* gamma, const float* beta, float eps,
                                           int64_t c, float* out, float* mean, float* rstd) {
  constexpr int64_t kLanes = 16;
  const float inv_c = 1.0f / static_cast<float>(c);
  const int64_t c_lanes = c - c % kLanes;
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
  for (int64_t j = 0; j < c; ++j) out[j] = (row[j] - m) * s * gamma[j] + beta[j];
  *mean = m;
  *rstd = s;
}

MIRRORED_ALWAYS_INLINE void layer_norm_forward_body(const float* x, const float* gamma, const float* beta, float eps,
                                                    int64_t rows, int64_t c, float* y, float* mean, float* rstd) {
  for (int64_t r = 0; r < rows; ++r) layer_norm_row(x + r * c, gamma, beta, eps, c, y + r * c, mean + r, rstd + r);
}

// sum = a + b row by row, each row normalised while it is still in L1: add() and then
// layer_norm_forward's operations, so the same bits as the two calls.
MIRRORED_ALWAYS_INLINE void add_layer_norm_forward_body(const float* a, const float* b, const float* gamma,
                                                        const float* beta, float eps, int64_t rows, int64_t c,
                                                        float* sum, float* y, float* mean, float* rstd) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* ar = a + r * c;
    const float* br = b + r * c;
    float* row = sum + r * c;
    for (int64_t j = 0; j < c; ++j) row[j] = ar[j] + br[j];
    layer_norm_row(row, gamma, beta, eps, c, y + r * c, mean + r, rstd + r);
  }
}

// Rows of layer_norm_backward taken kRowGroup at a time. Each row's two sums still run over
// its channels one by one in index order (the bits of the one-row loop this replaces), but
// a group's 2 x kRowGroup running sums are independent, so the CPU overlaps their adds
// where one row's chain made every add wait for the one before. The per-channel products
// are formed first, vectorised, into `scratch` (2 kRowGroup c floats).
constexpr int64_t kRowGroup = 8;

// One row's dg = dy gamma and dgx = dg xhat per channel, and its terms of dgamma and dbeta.
// The pointers never overlap (scratch, the gradients, the inputs): __restrict lets GCC
// vectorise the loop without run-time overlap checks, which it gives up on for six pointers.
MIRRORED_ALWAYS_INLINE void row_products(const float* __restrict xr, const float* __restrict gr,
                                         const float* __restrict gamma, float m, float s, int64_t c,
                                         float* __restrict dg, float* __restrict dgx, float* __restrict dgamma,
                                         float* __restrict dbeta) {
  for (int64_t j = 0; j < c; ++j) {
    const float xhat = (xr[j] - m) * s;
    const float d = gr[j] * gamma[j];
    dg[j] = d;
    dgx[j] = d * xhat;
    dgamma[j] += gr[j] * xhat;
    dbeta[j] += gr[j];
  }
}

// sums[2 g] and sums[2 g + 1] = sum over j of dg[g][j] and dgx[g][j], in j order.
template <int64_t kRows>
MIRRORED_ALWAYS_INLINE void row_sums_in_order(const float* dg, const float* dgx, int64_t c, float* sums) {
  float s[2 * kRows] = {};
  for (int64_t j = 0; j < c; ++j)
    for (int64_t g = 0; g < kRows; ++g) {
      s[2 * g] += dg[g * c + j];
      s[2 * g + 1] += dgx[g * c + j];
    }
  for (int64_t i = 0; i < 2 * kRows; ++i) sums[i] = s[i];
}

// dx = rstd (dy gamma - mean(dy gamma) - xhat mean(dy gamma xhat)), plus dresidual[] when
// given (a residual branch's gradient added in the same pass: the bits of add()).
MIRRORED_ALWAYS_INLINE void layer_norm_backward_rows_body(const float* x, const float* dy, const float* gamma,
                                                          const float* mean, const float* rstd,
                                                          const float* dresidual, int64_t rows, int64_t c, float* dx,
                                                          float* dgamma, float* dbeta, float* scratch) {
  const float inv_c = 1.0f / static_cast<float>(c);
  float* dg_all = scratch;
  float* dgx_all = scratch + kRowGroup * c;
  for (int64_t r0 = 0; r0 < rows; r0 += kRowGroup) {
    const int64_t n = rows - r0 < kRowGroup ? rows - r0 : kRowGroup;
    // Products per channel, and dgamma, dbeta in row order (as the one-row loop added them).
    for (int64_t g = 0; g < n; ++g) {
      const int64_t r = r0 + g;
      row_products(x + r * c, dy + r * c, gamma, mean[r], rstd[r], c, dg_all + g * c, dgx_all + g * c, dgamma, dbeta);
    }
    float sums[2 * kRowGroup];
    if (n == kRowGroup) {
      row_sums_in_order<kRowGroup>(dg_all, dgx_all, c, sums);
    } else {
      for (int64_t g = 0; g < n; ++g) row_sums_in_order<1>(dg_all + g * c, dgx_all + g * c, c, sums + 2 * g);
    }
    for (int64_t g = 0; g < n; ++g) {
      const int64_t r = r0 + g;
      const float* xr = x + r * c;
      const float m = mean[r];
      const float s = rstd[r];
      const float mean_dg = sums[2 * g] * inv_c;
      const float mean_dg_xhat = sums[2 * g + 1] * inv_c;
      const float* dg = dg_all + g * c;
      float* out = dx + r * c;
      if (dresidual) {
        const float* res = dresidual + r * c;
        for (int64_t j = 0; j < c; ++j) {
          const float xhat = (xr[j] - m) * s;
          out[j] = res[j] + s * (dg[j] - mean_dg - xhat * mean_dg_xhat);
        }
      } else {
        for (int64_t j = 0; j < c; ++j) {
          const float xhat = (xr[j] - m) * s;
          out[j] = s * (dg[j] - mean_dg - xhat * mean_dg_xhat);
        }
      }
    }
  }
}

}  // namespace

MIRRORED_SIMD_DISPATCH(layer_norm_forward,
                       (const float* x, const float* gamma, const float* beta, float eps, int64_t rows, int64_t c,
                        float* y, float* mean, float* rstd),
                       (x, gamma, beta, eps, rows, c, y, mean, rstd))
MIRRORED_SIMD_DISPATCH(add_layer_norm_forward,
                       (const float* a, const float* b, const float* gamma, const float* beta, float eps,
                        int64_t rows, int64_t c, float* sum, float* y, float* mean, float* rstd),
                       (a, b, gamma, beta, eps, rows, c, sum, y, mean, rstd))

namespace {
MIRRORED_SIMD_DISPATCH(layer_norm_backward_rows,
                       (const float* x, const float* dy, const float* gamma, const float* mean, const float* rstd,
                        const float* dresidual, int64_t rows, int64_t c, float* dx, float* dgamma, float* dbeta,
                        float* scratch),
                       (x, dy, gamma, mean, rstd, dresidual, rows, c, dx, dgamma, dbeta, scratch))
}  // namespace

void layer_norm_backward(const float* x, const float* dy, const float* gamma, const float* mean, const float* rstd,
                         const float* dresidual, int64_t rows, int64_t c, float* dx, float* dgamma, float* dbeta) {
  std::vector<float> scratch(static_cast<size_t>(2 * kRowGroup * c));
  layer_norm_backward_rows(x, dy, gamma, mean, rstd, dresidual, rows, c, dx, dgamma, dbeta, scratch.data());
}

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
