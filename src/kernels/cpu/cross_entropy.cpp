// Softmax cross-entropy, one row at a time: the row maximum is subtracted before exp so
// large logits cannot overflow, and the loss is summed in double so a large batch does
// not lose the small per-row terms. The exponentials are softmax_exp (transformer_math.h,
// the formula the CUDA kernel uses too) in a loop that vectorises, so the loss and the
// gradient are the same bits at every SIMD width; the sums run in one fixed order.
#include <algorithm>
#include <cmath>

#include "cpu_kernels.h"
#include "mirrored/core/error.h"
#include "mirrored/kernels/transformer_math.h"
#include "simd_dispatch.h"

namespace mirrored::kernels::cpu {
namespace {

// e[j] = e^(x[j] - max) for j < n.
MIRRORED_ALWAYS_INLINE void shifted_exp(const float* x, float max, int64_t n, float* e) {
  for (int64_t j = 0; j < n; ++j) e[j] = softmax_exp(x[j] - max);
}

MIRRORED_ALWAYS_INLINE void softmax_cross_entropy_rows_body(const float* logits, const int32_t* labels, int64_t rows,
                                                            int64_t classes, float* dlogits, float grad_scale,
                                                            CrossEntropyResult* result) {
  constexpr int64_t kChunk = 1024;  // exponentials held at a time when no gradient is wanted
  float chunk[kChunk];
  for (int64_t i = 0; i < rows; ++i) {
    const float* x = logits + i * classes;
    const int32_t label = labels[i];
    MIRRORED_CHECK(label >= 0 && label < classes, "label ", label, " of row ", i, " outside [0, ", classes, ")");

    // Strict '>' keeps the first index among ties, as torch.argmax does.
    int64_t arg_max = 0;
    float row_max = x[0];
    for (int64_t j = 1; j < classes; ++j) {
      if (x[j] > row_max) {
        row_max = x[j];
        arg_max = j;
      }
    }
    if (arg_max == label) ++result->correct;

    double sum_exp = 0.0;
    if (dlogits) {
      float* d = dlogits + i * classes;
      shifted_exp(x, row_max, classes, d);  // kept to turn into softmax below
      for (int64_t j = 0; j < classes; ++j) sum_exp += d[j];
      const float inv = static_cast<float>(1.0 / sum_exp) * grad_scale;
      for (int64_t j = 0; j < classes; ++j) d[j] *= inv;
      d[label] -= grad_scale;
    } else {
      for (int64_t j0 = 0; j0 < classes; j0 += kChunk) {
        const int64_t n = std::min(kChunk, classes - j0);
        shifted_exp(x + j0, row_max, n, chunk);
        for (int64_t j = 0; j < n; ++j) sum_exp += chunk[j];
      }
    }
    // -log softmax[label] = log(sum exp(x - max)) - (x[label] - max)
    result->loss_sum += std::log(sum_exp) - (static_cast<double>(x[label]) - row_max);
  }
}

MIRRORED_SIMD_DISPATCH(softmax_cross_entropy_rows,
                       (const float* logits, const int32_t* labels, int64_t rows, int64_t classes, float* dlogits,
                        float grad_scale, CrossEntropyResult* result),
                       (logits, labels, rows, classes, dlogits, grad_scale, result))

}  // namespace

CrossEntropyResult softmax_cross_entropy(const float* logits, const int32_t* labels, int64_t rows,
                                         int64_t classes, float* dlogits, float grad_scale) {
  CrossEntropyResult result;
  softmax_cross_entropy_rows(logits, labels, rows, classes, dlogits, grad_scale, &result);
  return result;
}

}  // namespace mirrored::kernels::cpu
