#pragma once
// softmax_exp (mirrored/kernels/transformer_math.h) on GCC's vector types, for kernels that
// keep whole rows in registers (fused_attention.cpp): the scalar formula's operations in
// its order, lane by lane, so every lane has the scalar function's bits and the CPU and
// CUDA kernels still share one formula. tests/unit/test_simd_exp.cpp holds them equal.
#include <bit>
#include <cstdint>

#include "mirrored/kernels/transformer_math.h"

namespace mirrored::kernels::cpu {

// Vectors pass between always-inlined functions only, so GCC's -Wpsabi notes on the AVX and
// AVX-512 calling conventions do not apply.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

// The int32 vector with as many lanes as the float vector V (an alias template cannot carry
// a dependent vector_size: GCC drops it).
template <int kBytes>
struct IntVector;
template <>
struct IntVector<16> {
  using type = int32_t __attribute__((vector_size(16)));
};
template <>
struct IntVector<32> {
  using type = int32_t __attribute__((vector_size(32)));
};
template <>
struct IntVector<64> {
  using type = int32_t __attribute__((vector_size(64)));
};
template <class V>
using IntLanes = typename IntVector<sizeof(V)>::type;

// exp_nonpositive, lane by lane.
template <class V>
[[gnu::always_inline]] inline V exp_nonpositive_lanes(V x) {
  using I = IntLanes<V>;
  constexpr float kRound = 12582912.0f;
  const V n = (x * 1.44269504088896341f + kRound) - kRound;
  const V r = (x - n * 0.693145751953125f) - n * 1.428606765330187045e-06f;
  V p = V{} + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const I scale = (__builtin_convertvector(n, I) + 127) << 23;
  return p * std::bit_cast<V>(scale);
}

// softmax_exp, lane by lane: fabsf and copysignf as the sign bit's masks.
template <class V>
[[gnu::always_inline]] inline V softmax_exp_lanes(V x) {
  using I = IntLanes<V>;
  constexpr int32_t kSign = INT32_MIN;
  constexpr int32_t kFloor = std::bit_cast<int32_t>(87.0f);
  constexpr int32_t kInf = 0x7f800000;
  const I xbits = std::bit_cast<I>(x);
  const I bits = xbits & ~kSign;
  const I clamped = bits < kFloor ? bits : I{} + kFloor;
  const V e = exp_nonpositive_lanes(std::bit_cast<V>(clamped | (xbits & kSign)));
  return std::bit_cast<V>((std::bit_cast<I>(e) & (bits < kFloor)) | (xbits & (bits > kInf)));
}

#pragma GCC diagnostic pop
}  // namespace mirrored::kernels::cpu
