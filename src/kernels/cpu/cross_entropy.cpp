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

// The row's maximum and its first index (strict '>' keeps the first among ties, as
// torch.argmax does); counts the row as correct when that is its label.
MIRRORED_ALWAYS_INLINE float row_max_counting(const float* x, int64_t classes, int32_t label,
                                              CrossEntropyResult* result) {
  int64_t arg_max = 0;
  float row_max = x[0];
  for (int64_t j = 1; j < classes; ++j) {
    if (x[j] > row_max) {
      row_max = x[j];
      arg_max = j;
    }
  }
  if (arg_max == label) ++result->correct;
  return row_max;
}

MIRRORED_ALWAYS_INLINE int32_t checked_label(const int32_t* labels, int64_t i, int64_t classes) {
  const int32_t label = labels[i];
  MIRRORED_CHECK(label >= 0 && label < classes, "label ", label, " of row ", i, " outside [0, ", classes, ")");
  return label;
}

// Rows taken kRowGroup at a time when the gradient is wanted: each row's sum of
// exponentials still runs over its classes in index order, in double (the bits of one row
// at a time), but the group's sums are independent chains the CPU overlaps, where one
// row's chain of dependent double adds set the loss's pace.
constexpr int64_t kRowGroup = 8;

template <int64_t kRows>
MIRRORED_ALWAYS_INLINE void sums_in_order(const float* e, int64_t classes, double* sums) {
  double s[kRows] = {};
  for (int64_t j = 0; j < classes; ++j)
    for (int64_t g = 0; g < kRows; ++g) s[g] += e[g * classes + j];
  for (int64_t g = 0; g < kRows; ++g) sums[g] = s[g];
}

MIRRORED_ALWAYS_INLINE void softmax_cross_entropy_grad_rows(const float* logits, const int32_t* labels, int64_t rows,
                                                            int64_t classes, float* dlogits, float grad_scale,
                                                            CrossEntropyResult* result) {
  for (int64_t r0 = 0; r0 < rows; r0 += kRowGroup) {
    const int64_t n = rows - r0 < kRowGroup ? rows - r0 : kRowGroup;
    float row_max[kRowGroup];
    for (int64_t g = 0; g < n; ++g) {
      const int64_t i = r0 + g;
      const float* x = logits + i * classes;
      row_max[g] = row_max_counting(x, classes, checked_label(labels, i, classes), result);
      shifted_exp(x, row_max[g], classes, dlogits + i * classes);  // kept to turn into softmax below
    }
    double sum_exp[kRowGroup];
    if (n == kRowGroup) {
      sums_in_order<kRowGroup>(dlogits + r0 * classes, classes, sum_exp);
    } else {
      for (int64_t g = 0; g < n; ++g) sums_in_order<1>(dlogits + (r0 + g) * classes, classes, sum_exp + g);
    }
    for (int64_t g = 0; g < n; ++g) {
      const int64_t i = r0 + g;
      float* d = dlogits + i * classes;
      const float inv = static_cast<float>(1.0 / sum_exp[g]) * grad_scale;
      for (int64_t j = 0; j < classes; ++j) d[j] *= inv;
      d[labels[i]] -= grad_scale;
      // -log softmax[label] = log(sum exp(x - max)) - (x[label] - max)
      result->loss_sum +=
          std::log(sum_exp[g]) - (static_cast<double>(logits[i * classes + labels[i]]) - row_max[g]);
    }
  }
}

MIRRORED_ALWAYS_INLINE void softmax_cross_entropy_rows_body(const float* logits, const int32_t* labels, int64_t rows,
                                                            int64_t classes, float* dlogits, float grad_scale,
                                                            CrossEntropyResult* result) {
  if (dlogits) {
    softmax_cross_entropy_grad_rows(logits, labels, rows, classes, dlogits, grad_scale, result);
    return;
  }
  constexpr int64_t kChunk = 1024;  // exponentials held at a time when no gradient is wanted
  float chunk[kChunk];
  for (int64_t i = 0; i < rows; ++i) {
    const float* x = logits + i * classes;
    const int32_t label = checked_label(labels, i, classes);
    const float row_max = row_max_counting(x, classes, label, result);
    double sum_exp = 0.0;
    for (int64_t j0 = 0; j0 < classes; j0 += kChunk) {
      const int64_t n = std::min(kChunk, classes - j0);
      shifted_exp(x + j0, row_max, n, chunk);
      for (int64_t j = 0; j < n; ++j) sum_exp += chunk[j];
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
