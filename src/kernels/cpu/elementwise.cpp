// Element-wise and row-wise ops. Plain loops over contiguous memory, written so that -O3
// vectorizes them: no branches in the inner loops, no aliasing surprises.
#include <cstring>

#include "cpu_kernels.h"

namespace mirrored::kernels::cpu {

void add_bias(float* y, const float* bias, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i) {
    float* row = y + i * cols;
    for (int64_t j = 0; j < cols; ++j) row[j] += bias[j];
  }
}

void accumulate_bias_grad(const float* dy, float* dbias, int64_t rows, int64_t cols) {
  // Row by row, so the inner loop runs along contiguous memory.
  for (int64_t i = 0; i < rows; ++i) {
    const float* row = dy + i * cols;
    for (int64_t j = 0; j < cols; ++j) dbias[j] += row[j];
  }
}

void relu_forward(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void relu_backward(const float* y, const float* dy, float* dx, int64_t n) {
  // dy[i] is read whether or not it passes: written as `y[i] > 0 ? dy[i] : 0`, the load
  // is conditional, so GCC kept a branch per element (mispredicted on about half of
  // them) and no vector loop; an unconditional load lets the choice become a select.
  for (int64_t i = 0; i < n; ++i) {
    const float g = dy[i];
    dx[i] = y[i] > 0.0f ? g : 0.0f;
  }
}

void scale(float* x, int64_t n, float alpha) {
  for (int64_t i = 0; i < n; ++i) x[i] *= alpha;
}

void axpy(int64_t n, float alpha, const float* x, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

bool all_finite(const float* x, int64_t n) {
  // A float is NaN or Inf exactly when its exponent bits are all ones. Testing the bits
  // with an integer OR-reduction vectorizes, where a floating-point test would not
  // without -ffast-math (which would also assume the NaNs away).
  constexpr uint32_t kExponent = 0x7f800000u;
  constexpr int64_t kChunk = 4096;  // stop early on a bad chunk without a branch per element
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t end = start + kChunk < n ? start + kChunk : n;
    uint32_t non_finite = 0;
    for (int64_t i = start; i < end; ++i) {
      uint32_t bits;
      std::memcpy(&bits, x + i, sizeof bits);
      non_finite |= static_cast<uint32_t>((bits & kExponent) == kExponent);
    }
    if (non_finite) return false;
  }
  return true;
}

}  // namespace mirrored::kernels::cpu
