// The grid conversions of an exact sum on the CPU (kernels/exact_grid.h has the formulas).
// The two hot loops are free of library calls so they vectorise, and are built once per
// SIMD width (simd_dispatch.h): integer operations and an exact product, so every clone
// gives the same bits.
#include <algorithm>
#include <cmath>

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

// sums[i] += x[i] on the grid that `scale` (2^-quantum) sets.
MIRRORED_ALWAYS_INLINE void add_to_grid_body(const float* x, size_t n, double scale, int64_t* sums) {
  for (size_t i = 0; i < n; ++i) sums[i] += grid_integer(x[i], scale);
}
MIRRORED_SIMD_DISPATCH(add_to_grid, (const float* x, size_t n, double scale, int64_t* sums), (x, n, scale, sums))

// grid_to_float over a run, in two passes so the first vectorises: the product by the
// float power of two, then the rare subnormal results redone.
void round_from_grid(const int64_t* sums, size_t n, int quantum, float* out) {
  if (!grid_scale_is_float(quantum)) {
    for (size_t i = 0; i < n; ++i) out[i] = grid_to_float_slow(sums[i], quantum);
    return;
  }
  const float scale = std::ldexp(1.0f, quantum);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(sums[i]) * scale;
  for (size_t i = 0; i < n; ++i)
    if (out[i] != 0.0f && std::fabs(out[i]) < 1.17549435e-38f) out[i] = grid_to_float_slow(sums[i], quantum);
}

bool summed_on_grid(int32_t exponent) { return exponent != kGridAllZero && exponent != kGridNonFinite; }

}  // namespace

void exact_grid_exponents(const std::vector<const float*>& terms, const std::vector<size_t>& offsets,
                          int32_t* exponents) {
  for (size_t s = 0; s + 1 < offsets.size(); ++s) {
    uint32_t largest = 0;
    for (const float* term : terms) largest_magnitude_bits(term + offsets[s], offsets[s + 1] - offsets[s], &largest);
    exponents[s] = grid_exponent(largest);
  }
}

void exact_grid_sums(const std::vector<const float*>& terms, const std::vector<size_t>& offsets,
                     const int32_t* exponents, int64_t total_terms, int64_t* sums) {
  std::fill(sums, sums + offsets.back(), int64_t{0});
  for (size_t s = 0; s + 1 < offsets.size(); ++s) {
    if (!summed_on_grid(exponents[s])) continue;
    const double scale = std::ldexp(1.0, -grid_quantum(exponents[s], total_terms));
    // Block by block, every term into the block's sums while they are in cache.
    constexpr size_t kBlock = 2048;
    for (size_t begin = offsets[s]; begin < offsets[s + 1]; begin += kBlock) {
      const size_t n = std::min(kBlock, offsets[s + 1] - begin);
      for (const float* term : terms) add_to_grid(term + begin, n, scale, sums + begin);
    }
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
