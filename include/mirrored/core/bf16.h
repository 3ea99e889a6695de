#pragma once
// bfloat16 as the upper half of a float32, stored in a uint16_t: the one definition of its
// rounding, used by the host (gradient compression over MPI, bf16 sums) and by CUDA
// kernels alike, so both sides round to the same bits.
#include <cstdint>
#include <cstring>

#include "mirrored/core/host_device.h"

namespace mirrored {

MIRRORED_HOST_DEVICE inline uint32_t float_bits(float value) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(value);
#else
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
#endif
}

MIRRORED_HOST_DEVICE inline float float_from_bits(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
#endif
}

// Round to nearest, ties to even; a NaN stays a (quiet) NaN instead of rounding to Inf.
MIRRORED_HOST_DEVICE inline uint16_t float_to_bf16(float value) {
  const uint32_t bits = float_bits(value);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0)
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

// Exact: every bfloat16 is a float32.
MIRRORED_HOST_DEVICE inline float bf16_to_float(uint16_t value) {
  return float_from_bits(static_cast<uint32_t>(value) << 16);
}

}  // namespace mirrored
