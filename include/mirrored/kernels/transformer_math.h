#pragma once
// Formulas of the transformer ops that the CPU and CUDA kernels share, written once so both
// sides compute the same function (src/kernels/cpu/transformer.cpp, cuda/transformer.cu).
#include <bit>
#include <cmath>
#include <cstdint>

#include "mirrored/core/host_device.h"

namespace mirrored::kernels {

// e^x for x in [-87, 0] to about 2 ulp, written without calls, branches or floating-point
// compares so that the compiler vectorises the loops that use it (libm's tanhf is a scalar
// call, and took over a third of a CPU training step in GELU alone; a float compare may
// trap, so GCC will not turn one into a blend). x = n ln2 + r with |r| <= ln2 / 2, e^r by
// its degree-6 Taylor polynomial (truncation below 2e-7 relative), 2^n via the exponent bits.
MIRRORED_HOST_DEVICE inline float exp_nonpositive(float x) {
  // Round x / ln2 to the nearest integer: adding 1.5 * 2^23 pushes the fraction out.
  constexpr float kRound = 12582912.0f;
  const float n = (x * 1.44269504088896341f + kRound) - kRound;
  // ln2 in two parts, so n * ln2 is subtracted without losing r's low bits.
  const float r = (x - n * 0.693145751953125f) - n * 1.428606765330187045e-06f;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const float scale = std::bit_cast<float>(static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23);
  return p * scale;
}

// e^x for any x <= 0: the exponent of a softmax once the row's maximum is subtracted, where
// exp_nonpositive's range ends (a rounding's worth above 0 is fine too). Below -87 (e^x under float's smallest normal) it is 0, as
// for libm up to denormals; NaN stays NaN, so a poisoned row still shows in the loss. The
// range tests compare bit patterns as integers (no float compare: see above), so the loops
// that call it vectorise and give the same bits at every SIMD width.
MIRRORED_HOST_DEVICE inline float softmax_exp(float x) {
  const int32_t bits = std::bit_cast<int32_t>(fabsf(x));
  constexpr int32_t kFloor = std::bit_cast<int32_t>(87.0f);
  constexpr int32_t kInf = 0x7f800000;
  // e is computed whatever x is (a clamped argument), then kept or dropped by integer masks:
  // GCC does not speculate float arithmetic behind a branch, so a select that guards the
  // exponential would leave the loop scalar.
  const float e = exp_nonpositive(copysignf(std::bit_cast<float>(bits < kFloor ? bits : kFloor), x));
  const int32_t keep_e = -static_cast<int32_t>(bits < kFloor);
  const int32_t keep_x = -static_cast<int32_t>(bits > kInf);
  return std::bit_cast<float>((std::bit_cast<int32_t>(e) & keep_e) | (std::bit_cast<int32_t>(x) & keep_x));
}

// tanh(u) = sign(u) (1 - e) / (1 + e) with e = e^(-2|u|) <= 1: nothing overflows. |u| is
// capped at 40 (tanh is 1 in float long before) by comparing bit patterns as integers,
// which order like the values for non-negative floats and never trap. Accurate to about
// 1e-7 absolute, not relative near 0 (1 - e cancels): right for GELU, which adds it to 1.
MIRRORED_HOST_DEVICE inline float tanh_approx(float u) {
  const int32_t bits = std::bit_cast<int32_t>(fabsf(u));
  constexpr int32_t kCap = std::bit_cast<int32_t>(40.0f);
  const float a = std::bit_cast<float>(bits < kCap ? bits : kCap);
  const float e = exp_nonpositive(-2.0f * a);
  return copysignf((1.0f - e) / (1.0f + e), u);
}

// GPT-2's GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
inline constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
inline constexpr float kGeluCubic = 0.044715f;

// The tanh's argument u = sqrt(2/pi) (x + 0.044715 x^3), and GELU and its derivative from
// tanh(u): a kernel that keeps tanh(u) from the forward pass (bias_gelu_forward) computes
// the derivative without a second exponential and division, with the same bits.
MIRRORED_HOST_DEVICE inline float gelu_tanh_argument(float x) { return kGeluScale * (x + kGeluCubic * x * x * x); }

MIRRORED_HOST_DEVICE inline float gelu_from_tanh(float x, float th) { return 0.5f * x * (1.0f + th); }

// d gelu / dx = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) du/dx.
MIRRORED_HOST_DEVICE inline float gelu_derivative_from_tanh(float x, float th) {
  const float dinner = kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
  return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * dinner;
}

MIRRORED_HOST_DEVICE inline float gelu(float x) { return gelu_from_tanh(x, tanh_approx(gelu_tanh_argument(x))); }

MIRRORED_HOST_DEVICE inline float gelu_derivative(float x) {
  return gelu_derivative_from_tanh(x, tanh_approx(gelu_tanh_argument(x)));
}

}  // namespace mirrored::kernels
