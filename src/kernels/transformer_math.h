#pragma once
// Formulas of the transformer ops that the CPU and CUDA kernels share, written once so both
// sides compute the same function (src/kernels/cpu/transformer.cpp, cuda/transformer.cu).
#include <cmath>

#include "mirrored/core/host_device.h"

namespace mirrored::kernels {

// GPT-2's GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
inline constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
inline constexpr float kGeluCubic = 0.044715f;

MIRRORED_HOST_DEVICE inline float gelu(float x) {
  const float inner = kGeluScale * (x + kGeluCubic * x * x * x);
  return 0.5f * x * (1.0f + tanhf(inner));
}

// d gelu / dx = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) du/dx, u the tanh's argument.
MIRRORED_HOST_DEVICE inline float gelu_derivative(float x) {
  const float inner = kGeluScale * (x + kGeluCubic * x * x * x);
  const float th = tanhf(inner);
  const float dinner = kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
  return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * dinner;
}

}  // namespace mirrored::kernels
