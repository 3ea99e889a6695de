#pragma once
// Causal self-attention worked out in double, element by element, for the kernels' tests
// (the materialised kernels and the fused one). qkv [B, T, 3C] packs q, k, v; dout [B, T, C].
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "mirrored/core/tensor.h"

namespace mirrored::testing {

// Per (b, h): s = q k^T / sqrt(hs) for j <= t, p = softmax(s), o = p v, lse = log sum e^s;
// backward: dv = p^T do, dp = do v^T, ds = p (dp - rowsum(p dp)), dq = ds k s, dk = ds^T q s.
struct AttentionReference {
  std::vector<double> out, lse, dqkv;
  std::vector<double> probs;  // [B, H, T, T], zeros above the diagonal; only when asked for
};
inline AttentionReference attention_reference(const Tensor& qkv, const Tensor& dout, int64_t heads,
                                               bool with_probs = false) {
  const int64_t B = qkv.dim(0), T = qkv.dim(1), C = qkv.dim(2) / 3, hs = C / heads;
  const float* X = qkv.data<float>();
  const float* D = dout.data<float>();
  AttentionReference r;
  r.out.assign(static_cast<size_t>(B * T * C), 0.0);
  r.lse.assign(static_cast<size_t>(B * heads * T), 0.0);
  r.dqkv.assign(static_cast<size_t>(B * T * 3 * C), 0.0);
  if (with_probs) r.probs.assign(static_cast<size_t>(B * heads * T * T), 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  std::vector<double> p(static_cast<size_t>(T)), dp(static_cast<size_t>(T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      const auto at = [&](int64_t t, int64_t part) { return (b * T + t) * 3 * C + part * C + h * hs; };
      for (int64_t t = 0; t < T; ++t) {
        double max = -1e300;
        for (int64_t j = 0; j <= t; ++j) {
          double dot = 0.0;
          for (int64_t i = 0; i < hs; ++i) dot += static_cast<double>(X[at(t, 0) + i]) * X[at(j, 1) + i];
          p[static_cast<size_t>(j)] = dot * scale;
          max = std::max(max, dot * scale);
        }
        double sum = 0.0;
        for (int64_t j = 0; j <= t; ++j) sum += std::exp(p[static_cast<size_t>(j)] - max);
        r.lse[static_cast<size_t>((b * heads + h) * T + t)] = max + std::log(sum);
        for (int64_t j = 0; j <= t; ++j) p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - max) / sum;
        if (with_probs)
          std::copy(p.begin(), p.begin() + t + 1, r.probs.begin() + ((b * heads + h) * T + t) * T);
        const float* dy = D + (b * T + t) * C + h * hs;
        double dot_p_dp = 0.0;
        for (int64_t j = 0; j <= t; ++j) {
          double o = 0.0;
          for (int64_t i = 0; i < hs; ++i) o += static_cast<double>(dy[i]) * X[at(j, 2) + i];
          dp[static_cast<size_t>(j)] = o;
          dot_p_dp += p[static_cast<size_t>(j)] * o;
        }
        for (int64_t j = 0; j <= t; ++j) {
          const double pj = p[static_cast<size_t>(j)];
          const double ds = pj * (dp[static_cast<size_t>(j)] - dot_p_dp) * scale;
          for (int64_t i = 0; i < hs; ++i) {
            r.out[static_cast<size_t>((b * T + t) * C + h * hs + i)] += pj * X[at(j, 2) + i];
            r.dqkv[static_cast<size_t>(at(j, 2) + i)] += pj * dy[i];
            r.dqkv[static_cast<size_t>(at(t, 0) + i)] += ds * X[at(j, 1) + i];
            r.dqkv[static_cast<size_t>(at(j, 1) + i)] += ds * X[at(t, 0) + i];
          }
        }
      }
    }
  return r;
}

}  // namespace mirrored::testing
