// Per-step statistics on the CPU: the non-finite tally and gradient clipping by global norm
// (formula in kernels/clip_math.h). The sum of squares runs in double, in a fixed order.
#include "cpu_kernels.h"
#include "mirrored/kernels/clip_math.h"

namespace mirrored::kernels::cpu {

void tally_non_finite(int32_t* flag, int32_t* tally, int32_t step, bool latch) {
  if (latch && tally[0] > 0) flag[0] = 1;
  if (flag[0] == 0) return;
  ++tally[0];
  if (tally[1] == 0) tally[1] = step;
}

// Eight running sums, x[i]^2 going to sum i mod 8, added in lane order at the end (and the
// tail after them): a fixed order whatever the vector width, in which the adds of one sum
// do not wait for the others'. A single running sum over the whole parameter arena was one
// chain of dependent double adds, about 2% of the gpt recipe's step.
double sum_squares(const float* x, int64_t n) {
  constexpr int64_t kLanes = 8;
  double lanes[kLanes] = {};
  const int64_t n_lanes = n - n % kLanes;
  for (int64_t i = 0; i < n_lanes; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] += static_cast<double>(x[i + l]) * static_cast<double>(x[i + l]);
  double sum = 0.0;
  for (int64_t l = 0; l < kLanes; ++l) sum += lanes[l];
  for (int64_t i = n_lanes; i < n; ++i) sum += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return sum;
}

void clip_factor(float sum_squares, float max_norm, float* norm, float* factor) {
  *norm = norm_of_sum_squares(sum_squares);
  *factor = clip_scale(*norm, max_norm);
}

void scale_by_clip(float* x, int64_t n, float sum_squares, float max_norm, float* norm) {
  float f = 0.0f;
  clip_factor(sum_squares, max_norm, norm, &f);
  const float factor = f;
  for (int64_t i = 0; i < n; ++i) x[i] *= factor;
}

}  // namespace mirrored::kernels::cpu
