#pragma once
// Gradient clipping by global norm, written once for the CPU and CUDA kernels: the factor
// of torch.nn.utils.clip_grad_norm_ (clip_coef = max_norm / (norm + 1e-6), clamped to at
// most 1; a NaN norm gives a NaN factor, as torch.clamp propagates it).
#include <cmath>

#include "mirrored/core/host_device.h"

namespace mirrored::kernels {

inline constexpr float kClipEpsilon = 1e-6f;

MIRRORED_HOST_DEVICE inline float clip_scale(float norm, float max_norm) {
  const float coef = max_norm / (norm + kClipEpsilon);
  return coef > 1.0f ? 1.0f : coef;
}

// The norm from the sum of squares, rounded the same way on both devices.
MIRRORED_HOST_DEVICE inline float norm_of_sum_squares(float sum_squares) { return sqrtf(sum_squares); }

}  // namespace mirrored::kernels
