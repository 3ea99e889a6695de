#pragma once
// How far a bf16 product (inputs rounded to bfloat16, float32 accumulation) may lie from the
// float32 one, and how far from the exact sum of the rounded inputs' products.
//
// bfloat16 keeps 8 significant bits, so rounding to nearest moves a value by at most
// u = 2^-8 of itself. A product of two rounded inputs is therefore within
// (1 + u)^2 - 1 = 2u + u^2 of the exact product of the unrounded ones. A dot product of
// length k sums k such terms: its rounding error is at most (2u + u^2) * sum_i |a_i b_i|.
// Both the bf16 and the float32 results also carry float32 accumulation error: a sum of k
// terms in any order is within about k * 2^-24 * sum |terms| of the exact sum (Higham's
// gamma_k), and a blocked or paired accumulation (oneDNN's VDPBF16PS adds two products per
// step) at most doubles the steps. So, per output element,
//   |bf16 - fp32| <= (2u + u^2 + 4 k 2^-24) * sum_i |a_i| |b_i|
// where the sum of absolute products is the same product run in float32 on |a| and |b|. The
// bound is tight in the u term (uniform inputs reach a good fraction of it on some element
// of a large product) and it fails at once when an input is rounded to fewer bits, rounded
// twice, or not accumulated in float32.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "mirrored/core/bf16.h"

namespace mirrored::testing {

inline constexpr double kBf16Unit = 1.0 / 256.0;           // 2^-8
inline constexpr double kF32Unit = 1.0 / 16777216.0;       // 2^-24

inline double bf16_vs_f32_bound(int64_t k) { return 2 * kBf16Unit + kBf16Unit * kBf16Unit + 4.0 * k * kF32Unit; }
// Between two float32 accumulations of the same rounded products (different orders).
inline double f32_accumulation_bound(int64_t k) { return 4.0 * (k + 1) * kF32Unit; }

inline std::vector<float> rounded_bf16(const std::vector<float>& x) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = bf16_to_float(float_to_bf16(x[i]));
  return y;
}

inline std::vector<float> absolute(const std::vector<float>& x) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = std::fabs(x[i]);
  return y;
}

// Every |got - want| <= relative * scale (scale: the sums of absolute products), with a
// little slack for the float32 rounding of `scale` itself. Returns the largest ratio of
// error to allowance (<= 1 passes), for the test's log.
inline double expect_within(const std::vector<float>& got, const std::vector<float>& want,
                            const std::vector<float>& scale, double relative, const char* what) {
  EXPECT_EQ(got.size(), want.size()) << what;
  double worst = 0.0;
  int reported = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const double allowed = relative * scale[i] * (1.0 + 1e-5) + 1e-30;
    const double error = std::fabs(static_cast<double>(got[i]) - want[i]);
    worst = std::max(worst, error / allowed);
    if (error > allowed && reported++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: " << got[i] << " vs " << want[i] << ", error " << error
                    << " > allowed " << allowed;
  }
  return worst;
}

// Whether any element differs (bf16 arithmetic that matches float32 everywhere did not round).
inline bool any_differs(const std::vector<float>& a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (a[i] != b[i]) return true;
  return false;
}

}  // namespace mirrored::testing
