#include "mirrored/comm/exact_sum.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>

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

// The power of two that one unit of the segment's integers stands for: no partial sum of
// total_terms terms leaves int64, and no term scales beyond 2^51, where adding 1.5 x 2^52
// turns a double into its rounded integer in the low mantissa bits (add_to_grid).
int quantum_exponent(int32_t exponent, int64_t total_terms) {
  return exponent + std::max(ceil_log2(total_terms), 11) - 62;
}

// The scalar sums' grid (a few values, converted one by one with llrint): only int64's
// headroom bounds it, 2^(ceil(log2 T) - 63) of the largest magnitude.
int scalar_quantum_exponent(int32_t exponent, int64_t total_terms) {
  return exponent + ceil_log2(total_terms) - 62;
}

template <typename T>
int32_t max_exponent(int32_t current, T x) {
  if (!std::isfinite(x)) return kNonFinite;
  if (x == 0 || current == kNonFinite) return current;
  int e = 0;
  std::frexp(x, &e);
  return current == kAllZero ? e : std::max(current, e);
}

int64_t to_grid(double x, int quantum) { return std::llrint(std::ldexp(x, -quantum)); }

// The hot loops of the float32 case, free of library calls so they vectorise.

// The largest magnitude's bit pattern over n floats: for finite floats the order of
// (bits & 0x7fffffff) as integers is the order of magnitudes; Inf and NaN lie above them all.
uint32_t max_magnitude_bits(const float* x, size_t n) {
  uint32_t best = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, sizeof(bits));
    best = std::max(best, bits & 0x7fffffffu);
  }
  return best;
}

int32_t exponent_of_bits(uint32_t magnitude_bits) {
  if (magnitude_bits >= 0x7f800000u) return kNonFinite;
  if (magnitude_bits == 0) return kAllZero;
  float largest;
  std::memcpy(&largest, &magnitude_bits, sizeof(largest));
  int e = 0;
  std::frexp(largest, &e);
  return e;
}

// sums[i] += x[i] on the grid of 2^quantum, rounded to nearest even: x * 2^-quantum is
// exact in double (a power of two) and below 2^51 in magnitude, so adding 1.5 x 2^52 rounds
// it as llrint does and leaves the integer in the mantissa: its bits minus those of
// 1.5 x 2^52. Integer and double arithmetic only, so it vectorises; built twice (baseline
// and AVX2, chosen at run time without ifunc, which sanitizer runtimes cannot start with),
// with the same operations in the same order, so both give the same bits.
inline __attribute__((always_inline)) void add_to_grid_body(const float* x, size_t n, double scale,
                                                            int64_t* sums) {
  constexpr double kMagic = 0x1.8p52;
  constexpr int64_t kMagicBits = 0x4338000000000000;
  for (size_t i = 0; i < n; ++i) {
    const double shifted = static_cast<double>(x[i]) * scale + kMagic;
    int64_t bits;
    std::memcpy(&bits, &shifted, sizeof(bits));
    sums[i] += bits - kMagicBits;
  }
}
#if defined(__x86_64__)
__attribute__((target("avx2")))
#endif
void add_to_grid_avx2(const float* x, size_t n, double scale, int64_t* sums) {
  add_to_grid_body(x, n, scale, sums);
}
void add_to_grid_baseline(const float* x, size_t n, double scale, int64_t* sums) {
  add_to_grid_body(x, n, scale, sums);
}
void add_to_grid(const float* x, size_t n, int quantum, int64_t* sums) {
#if defined(__x86_64__)
  static const bool avx2 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
#else
  constexpr bool avx2 = false;
#endif
  const double scale = std::ldexp(1.0, -quantum);
  if (avx2)
    add_to_grid_avx2(x, n, scale, sums);
  else
    add_to_grid_baseline(x, n, scale, sums);
}

// out[i] = sums[i] x 2^quantum, rounded to float once (the int64 to float conversion); the
// power of two is exact where it and the results are normal floats, else ldexp.
void from_grid(const int64_t* sums, size_t n, int quantum, float* out) {
  if (quantum > -100 && quantum < 100) {
    const float scale = std::ldexp(1.0f, quantum);
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(sums[i]) * scale;
    // A result below the normal range rounds a second time: redo those with ldexp.
    for (size_t i = 0; i < n; ++i)
      if (out[i] != 0.0f && std::fabs(out[i]) < std::numeric_limits<float>::min())
        out[i] = std::ldexp(static_cast<float>(sums[i]), quantum);
    return;
  }
  for (size_t i = 0; i < n; ++i) out[i] = std::ldexp(static_cast<float>(sums[i]), quantum);
}
}  // namespace

void exact_sum(const std::vector<const float*>& terms, const ExactSumLayout& layout, float* out,
               Communicator& comm) {
  const std::vector<size_t>& offsets = layout.offsets;
  MIRRORED_CHECK(!offsets.empty() && offsets.front() == 0, "exact_sum: segment offsets must start at 0");
  MIRRORED_CHECK(layout.total_terms >= 1 && layout.total_terms <= (int64_t{1} << 30), "exact_sum of ",
                 layout.total_terms, " terms (1 to 2^30)");
  const size_t segments = offsets.size() - 1, count = offsets.back();

  std::vector<int32_t> exponents(segments, kAllZero);
  for (size_t s = 0; s < segments; ++s) {
    uint32_t largest = 0;
    for (const float* term : terms)
      largest = std::max(largest, max_magnitude_bits(term + offsets[s], offsets[s + 1] - offsets[s]));
    exponents[s] = exponent_of_bits(largest);
  }
  comm.allreduce(exponents.data(), segments, ReduceOp::kMax);

  // Kept between calls (one per thread): a fresh 8-bytes-per-value buffer every step
  // would fault its pages in again.
  static thread_local std::vector<int64_t> sums;
  sums.assign(count, 0);
  bool any_non_finite = false;
  for (size_t s = 0; s < segments; ++s) {
    if (exponents[s] == kNonFinite) {
      any_non_finite = true;
      continue;
    }
    if (exponents[s] == kAllZero) continue;
    const int quantum = quantum_exponent(exponents[s], layout.total_terms);
    // Block by block, every term into the block's sums while they are in cache.
    constexpr size_t kBlock = 2048;
    for (size_t begin = offsets[s]; begin < offsets[s + 1]; begin += kBlock) {
      const size_t n = std::min(kBlock, offsets[s + 1] - begin);
      for (const float* term : terms) add_to_grid(term + begin, n, quantum, sums.data() + begin);
    }
  }
  comm.allreduce(sums.data(), count, ReduceOp::kSum);
  for (size_t s = 0; s < segments; ++s) {
    if (exponents[s] == kNonFinite) continue;
    const int quantum = exponents[s] == kAllZero ? 0 : quantum_exponent(exponents[s], layout.total_terms);
    // int64 -> float rounds to nearest once; the power of two is exact for normal results.
    from_grid(sums.data() + offsets[s], offsets[s + 1] - offsets[s], quantum, out + offsets[s]);
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
  const int quantum = exponent == kAllZero ? 0 : scalar_quantum_exponent(exponent, total_terms);
  int64_t sum = 0;
  if (exponent != kAllZero)
    for (const double v : values) sum += to_grid(v, quantum);
  sum = comm.allreduce_value(sum, ReduceOp::kSum);
  return std::ldexp(static_cast<double>(sum), quantum);
}

}  // namespace mirrored::comm
