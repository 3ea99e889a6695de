#pragma once
// The arithmetic of matrix products and convolutions. kBF16 rounds their inputs to
// bfloat16 (core/bf16.h: 8 significant bits, the exponent range of float32) and
// accumulates in float32, giving float32 outputs; everything else (parameters, optimizer
// state, normalisation statistics, softmax, losses, gradient reduction) stays float32 in
// either mode. bfloat16 has float32's exponent range, so gradients do not underflow
// where float32's would not: no loss scaling is needed.
namespace mirrored {

enum class Precision { kF32, kBF16 };

inline const char* precision_name(Precision precision) { return precision == Precision::kBF16 ? "bf16" : "fp32"; }

}  // namespace mirrored
