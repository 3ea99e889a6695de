#include "mirrored/comm/exact_sum.h"

#include <climits>
#include <cmath>

#include "mirrored/core/error.h"

namespace mirrored::comm {
namespace {
// Exponents exchanged per segment: frexp's e of the largest magnitude (|x| < 2^e), or one
// of these two when the segment has no such value.
constexpr int32_t kAllZero = INT32_MIN;
constexpr int32_t kNonFinite = INT32_MAX;

int ceil_log2(int64_t n) {
  int bits = 0;
  while ((int64_t{1} << bits) < n) ++bits;
  return bits;
}

// The power of two that one unit of the segment's integers stands for.
int quantum_exponent(int32_t exponent, int64_t total_terms) { return exponent + ceil_log2(total_terms) - 62; }

template <typename T>
int32_t max_exponent(int32_t current, T x) {
  if (!std::isfinite(x)) return kNonFinite;
  if (x == 0 || current == kNonFinite) return current;
  int e = 0;
  std::frexp(x, &e);
  return current == kAllZero ? e : std::max(current, e);
}

int64_t to_grid(double x, int quantum) { return std::llrint(std::ldexp(x, -quantum)); }
}  // namespace

void exact_sum(const std::vector<const float*>& terms, const ExactSumLayout& layout, float* out,
               Communicator& comm) {
  const std::vector<size_t>& offsets = layout.offsets;
  MIRRORED_CHECK(!offsets.empty() && offsets.front() == 0, "exact_sum: segment offsets must start at 0");
  MIRRORED_CHECK(layout.total_terms >= 1 && layout.total_terms <= (int64_t{1} << 30), "exact_sum of ",
                 layout.total_terms, " terms (1 to 2^30)");
  const size_t segments = offsets.size() - 1, count = offsets.back();

  std::vector<int32_t> exponents(segments, kAllZero);
  for (size_t s = 0; s < segments; ++s)
    for (const float* term : terms)
      for (size_t i = offsets[s]; i < offsets[s + 1]; ++i) exponents[s] = max_exponent(exponents[s], term[i]);
  comm.allreduce(exponents.data(), segments, ReduceOp::kMax);

  std::vector<int64_t> sums(count, 0);
  bool any_non_finite = false;
  for (size_t s = 0; s < segments; ++s) {
    if (exponents[s] == kNonFinite) {
      any_non_finite = true;
      continue;
    }
    if (exponents[s] == kAllZero) continue;
    const int quantum = quantum_exponent(exponents[s], layout.total_terms);
    for (const float* term : terms)
      for (size_t i = offsets[s]; i < offsets[s + 1]; ++i) sums[i] += to_grid(term[i], quantum);
  }
  comm.allreduce(sums.data(), count, ReduceOp::kSum);
  for (size_t s = 0; s < segments; ++s) {
    if (exponents[s] == kNonFinite) continue;
    const int quantum = exponents[s] == kAllZero ? 0 : quantum_exponent(exponents[s], layout.total_terms);
    // int64 -> float rounds to nearest once; the power of two is exact for normal results.
    for (size_t i = offsets[s]; i < offsets[s + 1]; ++i) out[i] = std::ldexp(static_cast<float>(sums[i]), quantum);
  }

  if (!any_non_finite) return;
  // Segments holding NaN or Inf somewhere: a float32 sum, so they propagate as in an
  // all-reduce (every rank took this branch: the exponents are the same everywhere).
  std::vector<float> plain(count, 0.0f);
  for (size_t s = 0; s < segments; ++s)
    if (exponents[s] == kNonFinite)
      for (const float* term : terms)
        for (size_t i = offsets[s]; i < offsets[s + 1]; ++i) plain[i] += term[i];
  comm.allreduce(plain.data(), count, ReduceOp::kSum);
  for (size_t s = 0; s < segments; ++s)
    if (exponents[s] == kNonFinite)
      for (size_t i = offsets[s]; i < offsets[s + 1]; ++i) out[i] = plain[i];
}

double exact_sum(const std::vector<double>& values, int64_t total_terms, Communicator& comm) {
  MIRRORED_CHECK(total_terms >= 1 && total_terms <= (int64_t{1} << 30), "exact_sum of ", total_terms,
                 " terms (1 to 2^30)");
  int32_t exponent = kAllZero;
  for (const double v : values) exponent = max_exponent(exponent, v);
  exponent = comm.allreduce_value(exponent, ReduceOp::kMax);
  if (exponent == kNonFinite) {
    double plain = 0.0;
    for (const double v : values) plain += v;
    return comm.allreduce_value(plain, ReduceOp::kSum);
  }
  const int quantum = exponent == kAllZero ? 0 : quantum_exponent(exponent, total_terms);
  int64_t sum = 0;
  if (exponent != kAllZero)
    for (const double v : values) sum += to_grid(v, quantum);
  sum = comm.allreduce_value(sum, ReduceOp::kSum);
  return std::ldexp(static_cast<double>(sum), quantum);
}

}  // namespace mirrored::comm
