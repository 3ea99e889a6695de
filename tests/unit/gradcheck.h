#pragma once
// Finite-difference gradient checks shared by the unit tests.
//
// Analytic gradients are compared with central differences (f(x+h) - f(x-h)) / 2h of a
// scalar function evaluated in float32 by the code under test and summed in double. The
// truncation error of the central difference is O(h^2 f''') and the rounding error about
// 1e-7 |f| / h; with h = 1e-2..1e-3 on O(1) inputs the tests here measure errors below
// 1e-5, while a wrong gradient (a missing transpose, a dropped term) is off by O(1).
// kGradTolerance leaves two orders of magnitude for other inputs and BLAS builds.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "mirrored/core/rng.h"
#include "mirrored/core/tensor.h"

namespace mirrored::testing {

inline constexpr double kGradTolerance = 1e-3;

// max|a - b| / max(1, max|a|, max|b|): relative for large values, absolute near zero.
inline double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double diff = 0.0, scale = 1.0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max({scale, std::abs(static_cast<double>(a[i])), std::abs(static_cast<double>(b[i]))});
  }
  return diff / scale;
}

// d f / d x by central differences, perturbing each element of `x` in place (x may be a
// view into a parameter arena) and restoring it afterwards.
inline std::vector<float> numerical_grad(const Tensor& x, const std::function<double()>& f, float h) {
  float* data = x.data<float>();
  std::vector<float> grad(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float saved = data[i];
    data[i] = saved + h;
    const double up = f();
    data[i] = saved - h;
    const double down = f();
    data[i] = saved;
    // The step actually taken, after float rounding of saved +- h.
    const double step = static_cast<double>(saved + h) - static_cast<double>(saved - h);
    grad[static_cast<size_t>(i)] = static_cast<float>((up - down) / step);
  }
  return grad;
}

// Inside a network the inputs of ReLUs and max-pool windows cannot be kept away from
// their kinks (we measured max-pool windows whose top two values differ by 1.4e-5), and a
// central difference that straddles one is off by O(1) whatever the step: a few entries
// of a large check may disagree for that reason alone. This returns the share of entries
// whose analytic and numerical derivatives agree within kGradTolerance (on the scale of
// relative_error); a wrong formula (a missing term, a wrong index) breaks most entries,
// a kink only the few whose step crossed it.
inline double agreeing_fraction(const std::vector<float>& analytic, const std::vector<float>& numeric) {
  if (analytic.size() != numeric.size() || analytic.empty()) return 0.0;
  double scale = 1.0;
  for (size_t i = 0; i < analytic.size(); ++i)
    scale = std::max({scale, std::abs(static_cast<double>(analytic[i])), std::abs(static_cast<double>(numeric[i]))});
  size_t agree = 0;
  for (size_t i = 0; i < analytic.size(); ++i)
    agree += std::abs(static_cast<double>(analytic[i]) - numeric[i]) <= kGradTolerance * scale;
  return static_cast<double>(agree) / static_cast<double>(analytic.size());
}

// sum(y * weights) in double: a scalar whose gradient with respect to y is `weights`.
inline double weighted_sum(const Tensor& y, const Tensor& weights) {
  const float* a = y.data<float>();
  const float* b = weights.data<float>();
  double sum = 0.0;
  for (int64_t i = 0; i < y.numel(); ++i) sum += static_cast<double>(a[i]) * b[i];
  return sum;
}

inline Tensor random_tensor(const Shape& shape, Rng& rng, float lo = -1.0f, float hi = 1.0f) {
  Tensor t(shape);
  float* data = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) data[i] = rng.uniform(lo, hi);
  return t;
}

}  // namespace mirrored::testing
