#pragma once
// Parameter comparisons for the MPI tests that set two ways of reducing against each other.
#include <algorithm>
#include <cmath>
#include <vector>

// max |a - b| over max |a| (at least 1e-6): the world-size tolerance is a bound on this.
inline double max_relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 1e-6;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(a[i])));
  }
  return diff / scale;
}
