#pragma once
// The fixed-point grid of an exact sum (comm/exact_sum.h says why and how it is used),
// written once for the CPU and CUDA kernels so both put a value on the same integer and
// round the total to the same float.
//
// A segment of a buffer gets one grid: its exponent e is frexp's exponent of the largest
// magnitude in the segment over every term on every rank (|x| < 2^e), and one unit of the
// integers stands for 2^quantum, quantum = e + max(ceil(log2 T), 11) - 62 for T terms in
// all. No partial sum of T terms then leaves int64, and no term's integer exceeds 2^51,
// which lets a double's mantissa do the rounding (grid_integer).
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "mirrored/core/host_device.h"

namespace mirrored::kernels {

// A segment's exponent when it has no largest magnitude: every value is zero, or some
// value is NaN or infinite (such a segment is summed in float instead).
inline constexpr int32_t kGridAllZero = INT32_MIN;
inline constexpr int32_t kGridNonFinite = INT32_MAX;

MIRRORED_HOST_DEVICE inline int grid_ceil_log2(int64_t n) {
  int bits = 0;
  while ((int64_t{1} << bits) < n) ++bits;
  return bits;
}

// The power of two one unit of a segment's integers stands for.
MIRRORED_HOST_DEVICE inline int grid_quantum(int32_t exponent, int64_t total_terms) {
  const int headroom = grid_ceil_log2(total_terms);
  return exponent + (headroom > 11 ? headroom : 11) - 62;
}

// |x|'s bit pattern: for finite floats the order of these as integers is the order of
// magnitudes, and Inf and NaN lie above them all, so a max over them finds the largest.
MIRRORED_HOST_DEVICE inline uint32_t magnitude_bits(float x) {
  uint32_t bits;
#if defined(__CUDA_ARCH__)
  bits = static_cast<uint32_t>(__float_as_uint(x));
#else
  std::memcpy(&bits, &x, sizeof(bits));
#endif
  return bits & 0x7fffffffu;
}

// frexp's exponent of the float with magnitude bits `m` (the largest of a segment), from
// the bits alone: a normal float with biased exponent b lies in [2^(b-127), 2^(b-126)); a
// subnormal m x 2^-149 has its top bit at 2^(bit_width(m) - 150).
MIRRORED_HOST_DEVICE inline int32_t grid_exponent(uint32_t m) {
  if (m >= 0x7f800000u) return kGridNonFinite;
  if (m == 0) return kGridAllZero;
  const int32_t biased = static_cast<int32_t>(m >> 23);
  if (biased > 0) return biased - 126;
#if defined(__CUDA_ARCH__)
  const int32_t width = 32 - __clz(static_cast<int>(m));
#else
  const int32_t width = 32 - __builtin_clz(m);
#endif
  return width - 149;
}

// x on the grid of 2^quantum as an integer, rounded to nearest even: with scale =
// 2^-quantum, x * scale is exact in double (a power of two) and below 2^51 in magnitude, so
// adding 1.5 x 2^52 rounds it as llrint does and leaves the integer in the low mantissa
// bits: the sum's bits minus those of 1.5 x 2^52. (A fused multiply-add gives the same
// bits: the product is exact.) Integer and double arithmetic only, so it vectorises.
MIRRORED_HOST_DEVICE inline int64_t grid_integer(float x, double scale) {
  constexpr double kMagic = 0x1.8p52;
  constexpr int64_t kMagicBits = 0x4338000000000000;
  const double shifted = static_cast<double>(x) * scale + kMagic;
  int64_t bits;
#if defined(__CUDA_ARCH__)
  bits = __double_as_longlong(shifted);
#else
  std::memcpy(&bits, &shifted, sizeof(bits));
#endif
  return bits - kMagicBits;
}

// Whether a total on the grid of 2^quantum converts to float as int64 -> float (rounded to
// nearest once) times 2^quantum, a float power of two that is exact while the result is a
// normal float; outside this range, and for subnormal results, grid_to_float_slow.
MIRRORED_HOST_DEVICE inline bool grid_scale_is_float(int quantum) { return quantum > -100 && quantum < 100; }

MIRRORED_HOST_DEVICE inline float grid_to_float_slow(int64_t total, int quantum) {
  return ldexpf(static_cast<float>(total), quantum);
}

// A total back to float, rounded once: the product by a float power of two where that is
// exact, ldexp where the result is subnormal (the product would round a second time).
MIRRORED_HOST_DEVICE inline float grid_to_float(int64_t total, int quantum, float scale) {
  if (!grid_scale_is_float(quantum)) return grid_to_float_slow(total, quantum);
  const float fast = static_cast<float>(total) * scale;
  if (fast != 0.0f && fabsf(fast) < 1.17549435e-38f) return grid_to_float_slow(total, quantum);
  return fast;
}

}  // namespace mirrored::kernels
