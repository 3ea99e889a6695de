// The grid conversions of an exact sum on the CPU (kernels/exact_grid.h has the formulas).
// The two hot loops are free of library calls so they vectorise, and are built once per
// SIMD width (simd_dispatch.h): integer operations and an exact product, so every clone
// gives the same bits.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "mirrored/core/error.h"
#include "cpu_kernels.h"
#include "mirrored/kernels/exact_grid.h"
#include "simd_dispatch.h"

namespace mirrored::kernels::cpu {
namespace {

// best = the largest magnitude's bits over x[0, n) and best (an unsigned max: SSE4.1 and up).
MIRRORED_ALWAYS_INLINE void largest_magnitude_bits_body(const float* x, size_t n, uint32_t* best) {
  uint32_t largest = *best;
  for (size_t i = 0; i < n; ++i) largest = std::max(largest, magnitude_bits(x[i]));
  *best = largest;
}
MIRRORED_SIMD_DISPATCH(largest_magnitude_bits, (const float* x, size_t n, uint32_t* best), (x, n, best))

// sums[i] (+)= the grid integers of kTerms terms' i-th values on the grid that `scale`
// (2^-quantum) sets: up to four terms in one pass, so a value's int64 is loaded and stored
// once per four terms, not once per term. Integer sums are exact in any order, so how the
// terms are grouped does not change a bit.
template <int kTerms, bool kAccumulate>
MIRRORED_ALWAYS_INLINE void grid_terms_body(const float* const* terms, size_t n, double scale, int64_t* sums) {
  const float* x[kTerms];
  for (int t = 0; t < kTerms; ++t) x[t] = terms[t];
  for (size_t i = 0; i < n; ++i) {
    int64_t sum = kAccumulate ? sums[i] : 0;
    for (int t = 0; t < kTerms; ++t) sum += grid_integer(x[t][i], scale);
    sums[i] = sum;
  }
}
using GridTerms = void (*)(const float* const* terms, size_t n, double scale, int64_t* sums);
#define MIRRORED_GRID_TERMS(count, accumulate, name)                                                      \
  MIRRORED_ALWAYS_INLINE void name##_body(const float* const* terms, size_t n, double scale, int64_t* sums) { \
    grid_terms_body<count, accumulate>(terms, n, scale, sums);                                                \
  }                                                                                                           \
  MIRRORED_SIMD_DISPATCH(name, (const float* const* terms, size_t n, double scale, int64_t* sums),            \
                         (terms, n, scale, sums))
MIRRORED_GRID_TERMS(1, false, grid_set1)
MIRRORED_GRID_TERMS(2, false, grid_set2)
MIRRORED_GRID_TERMS(3, false, grid_set3)
MIRRORED_GRID_TERMS(4, false, grid_set4)
MIRRORED_GRID_TERMS(1, true, grid_add1)
MIRRORED_GRID_TERMS(2, true, grid_add2)
MIRRORED_GRID_TERMS(3, true, grid_add3)
MIRRORED_GRID_TERMS(4, true, grid_add4)
#undef MIRRORED_GRID_TERMS
constexpr GridTerms kGridSet[4] = {grid_set1, grid_set2, grid_set3, grid_set4};
constexpr GridTerms kGridAdd[4] = {grid_add1, grid_add2, grid_add3, grid_add4};

// sums[i] = every term's integer at i added, over the n values from `begin`; then the
// values of the terms with spent[t] (null: none) set to +0, group by group, while the
// group's four runs are still in the first-level cache.
void sum_on_grid(const std::vector<const float*>& terms, const std::vector<float*>& spent, size_t begin, size_t n,
                 double scale, int64_t* sums) {
  const float* group[4];
  for (size_t first = 0; first < terms.size(); first += 4) {
    const size_t count = std::min<size_t>(4, terms.size() - first);
    for (size_t t = 0; t < count; ++t) group[t] = terms[first + t] + begin;
    (first == 0 ? kGridSet : kGridAdd)[count - 1](group, n, scale, sums + begin);
    for (size_t t = first; t < first + count; ++t)
      if (spent[t] != nullptr) std::memset(spent[t] + begin, 0, n * sizeof(float));
  }
}

// int64 to float rounded to nearest once, as a scalar conversion rounds, from operations
// AVX2 has in vectors (it has no int64-to-float conversion; AVX512DQ has). v is split into
// halves that are exact in double, v = high x 2^32 + low; their sum is rounded to odd (the
// nearest double, stepped one place toward v when that was inexact and left the last bit
// even: Fast2Sum's error says whether it was inexact and on which side v lies), and that
// double is rounded to float. Rounding to odd with 53 >= 24 + 2 bits first leaves the final
// rounding what rounding v once gives; rounding to nearest twice would not (2^60 + 2^36 + 1
// would go to 2^60 through the double 2^60 + 2^36, a tie, instead of up to 2^60 + 2^37).
MIRRORED_ALWAYS_INLINE float int64_to_float_by_halves(int64_t v) {
  const auto u = static_cast<uint64_t>(v);
  // Each half as the low mantissa bits of 2^52, less 2^52 (the signed high half offset by 2^31
  // into [0, 2^32) first, and the offset subtracted with it): exact.
  const double high =
      (std::bit_cast<double>(0x4330000000000000ull | ((u >> 32) ^ 0x80000000ull)) - 0x1.000008p52) * 0x1p32;
  const double low = std::bit_cast<double>(0x4330000000000000ull | (u & 0xffffffffull)) - 0x1p52;
  // Fast2Sum (|high| >= 2^32 > low, or high == 0 and the sum is exact).
  const double sum = high + low;
  const double error = low - (sum - high);
  const auto bits = std::bit_cast<uint64_t>(sum);
  const uint64_t step = static_cast<uint64_t>(error != 0.0) & ~bits & 1u;  // inexact and even
  // Toward zero (the magnitude's bits down) where the error's sign is not the sum's.
  const uint64_t toward_zero = (std::bit_cast<uint64_t>(error) ^ bits) >> 63;
  return static_cast<float>(std::bit_cast<double>(bits + ((step ^ (0 - toward_zero)) + toward_zero)));
}

// out[i] = sums[i] as float (rounded to nearest once) times `quantum`'s float power of two;
// then the rare results that are subnormal, where the product rounded a second time, redone
// with ldexp. The conversion is one instruction with AVX512DQ and the halves above with AVX2
// (a clone each, vectorised; both round as the scalar conversion does, so every clone gives
// the same bits).
template <bool kByHalves>
MIRRORED_ALWAYS_INLINE void scale_from_grid_body(const int64_t* sums, size_t n, int quantum, float* out) {
  const float scale = std::ldexp(1.0f, quantum);
  // Whether any result is subnormal, as an OR over the run (a branch per value would not
  // vectorise): magnitude bits in [1, 2^23) are the subnormals.
  uint32_t any_subnormal = 0;
  for (size_t i = 0; i < n; ++i) {
    out[i] = (kByHalves ? int64_to_float_by_halves(sums[i]) : static_cast<float>(sums[i])) * scale;
    any_subnormal |= static_cast<uint32_t>(magnitude_bits(out[i]) - 1u < 0x7fffffu);
  }
  if (any_subnormal == 0) return;
  for (size_t i = 0; i < n; ++i)
    if (out[i] != 0.0f && std::fabs(out[i]) < 1.17549435e-38f) out[i] = grid_to_float_slow(sums[i], quantum);
}
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx512f,avx512dq"))) void scale_from_grid_avx512dq(const int64_t* sums, size_t n, int quantum,
                                                                          float* out) {
  scale_from_grid_body<false>(sums, n, quantum, out);
}
__attribute__((target("avx2"))) void scale_from_grid_avx2(const int64_t* sums, size_t n, int quantum, float* out) {
  scale_from_grid_body<true>(sums, n, quantum, out);
}
void scale_from_grid(const int64_t* sums, size_t n, int quantum, float* out) {
  static const bool cpu_has_dq = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  }();
  const SimdLevel level = simd_level();
  if (cpu_has_dq && level == SimdLevel::kAvx512) return scale_from_grid_avx512dq(sums, n, quantum, out);
  if (level >= SimdLevel::kAvx2) return scale_from_grid_avx2(sums, n, quantum, out);
  scale_from_grid_body<false>(sums, n, quantum, out);
}
#else
void scale_from_grid(const int64_t* sums, size_t n, int quantum, float* out) {
  scale_from_grid_body<false>(sums, n, quantum, out);
}
#endif

// grid_to_float over a run.
void round_from_grid(const int64_t* sums, size_t n, int quantum, float* out) {
  if (!grid_scale_is_float(quantum)) {
    for (size_t i = 0; i < n; ++i) out[i] = grid_to_float_slow(sums[i], quantum);
    return;
  }
  scale_from_grid(sums, n, quantum, out);
}

bool summed_on_grid(int32_t exponent) { return exponent != kGridAllZero && exponent != kGridNonFinite; }

// Every buffer of `runs` = +0 over [begin, begin + n).
void zero_runs(const std::vector<float*>& runs, size_t begin, size_t n) {
  for (float* run : runs) std::memset(run + begin, 0, n * sizeof(float));
}

}  // namespace

void exact_grid_exponents(const std::vector<const float*>& terms, const std::vector<size_t>& offsets,
                          const uint32_t* known_largest, int32_t* exponents) {
  for (size_t s = 0; s + 1 < offsets.size(); ++s) {
    uint32_t largest = known_largest ? known_largest[s] : 0;
    for (const float* term : terms) largest_magnitude_bits(term + offsets[s], offsets[s + 1] - offsets[s], &largest);
    exponents[s] = grid_exponent(largest);
  }
}

void exact_grid_exponents(const std::vector<const float*>& terms, const std::vector<size_t>& offsets,
                          int32_t* exponents) {
  exact_grid_exponents(terms, offsets, nullptr, exponents);
}

void exact_grid_largest(const float* x, const std::vector<size_t>& offsets, uint32_t* largest) {
  for (size_t s = 0; s + 1 < offsets.size(); ++s) {
    largest[s] = 0;
    largest_magnitude_bits(x + offsets[s], offsets[s + 1] - offsets[s], &largest[s]);
  }
}

void exact_grid_sums(const std::vector<const float*>& terms, const std::vector<size_t>& offsets,
                     const int32_t* exponents, int64_t total_terms, int64_t* sums) {
  exact_grid_sums(terms, offsets, exponents, total_terms, sums, {});
}

void exact_grid_sums(const std::vector<const float*>& terms, const std::vector<size_t>& offsets,
                     const int32_t* exponents, int64_t total_terms, int64_t* sums, const std::vector<float*>& spent) {
  // spent_term[t]: terms[t] as writable memory when it is spent, else null.
  std::vector<float*> spent_term(terms.size(), nullptr);
  for (float* buffer : spent) {
    const auto found = std::find(terms.begin(), terms.end(), buffer);
    MIRRORED_CHECK(found != terms.end(), "exact_grid_sums: a spent buffer that is not one of the terms");
    spent_term[static_cast<size_t>(found - terms.begin())] = buffer;
  }
  for (size_t s = 0; s + 1 < offsets.size(); ++s) {
    if (terms.empty() || !summed_on_grid(exponents[s])) {
      std::fill(sums + offsets[s], sums + offsets[s + 1], int64_t{0});
      zero_runs(spent, offsets[s], offsets[s + 1] - offsets[s]);
      continue;
    }
    const double scale = std::ldexp(1.0, -grid_quantum(exponents[s], total_terms));
    // Block by block, every term into the block's sums while they are in cache, and the
    // spent terms zeroed while they still are (zeroing them cold later costs as much as the
    // sums' own reads).
    constexpr size_t kBlock = 2048;
    for (size_t begin = offsets[s]; begin < offsets[s + 1]; begin += kBlock)
      sum_on_grid(terms, spent_term, begin, std::min(kBlock, offsets[s + 1] - begin), scale, sums);
  }
}

void exact_grid_plain_sums(const std::vector<const float*>& terms, const std::vector<size_t>& offsets,
                           const int32_t* exponents, float* plain) {
  std::fill(plain, plain + offsets.back(), 0.0f);
  for (size_t s = 0; s + 1 < offsets.size(); ++s)
    if (exponents[s] == kGridNonFinite)
      for (const float* term : terms)
        for (size_t i = offsets[s]; i < offsets[s + 1]; ++i) plain[i] += term[i];
}

void exact_grid_round(const int64_t* sums, const float* plain, const std::vector<size_t>& offsets,
                      const int32_t* exponents, int64_t total_terms, float* out) {
  for (size_t s = 0; s + 1 < offsets.size(); ++s) {
    const size_t begin = offsets[s], n = offsets[s + 1] - begin;
    if (exponents[s] == kGridNonFinite) {
      std::copy(plain + begin, plain + begin + n, out + begin);
      continue;
    }
    // An all-zero segment's sums are zeros: any grid gives +0.
    const int quantum = summed_on_grid(exponents[s]) ? grid_quantum(exponents[s], total_terms) : 0;
    round_from_grid(sums + begin, n, quantum, out + begin);
  }
}

}  // namespace mirrored::kernels::cpu
