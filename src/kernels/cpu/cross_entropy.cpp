// Softmax cross-entropy, one row at a time: the row maximum is subtracted before exp so
// large logits cannot overflow, and the loss is summed in double so a large batch does
// not lose the small per-row terms.
#include <cmath>

#include "cpu_kernels.h"
#include "mirrored/core/error.h"

namespace mirrored::kernels::cpu {

CrossEntropyResult softmax_cross_entropy(const float* logits, const int32_t* labels, int64_t rows,
                                         int64_t classes, float* dlogits, float grad_scale) {
  CrossEntropyResult result;
  for (int64_t i = 0; i < rows; ++i) {
    const float* x = logits + i * classes;
    const int32_t label = labels[i];
    MIRRORED_CHECK(label >= 0 && label < classes, "label ", label, " of row ", i, " outside [0, ",
                   classes, ")");

    // Strict '>' keeps the first index among ties, as torch.argmax does.
    int64_t arg_max = 0;
    float row_max = x[0];
    for (int64_t j = 1; j < classes; ++j) {
      if (x[j] > row_max) {
        row_max = x[j];
        arg_max = j;
      }
    }
    if (arg_max == label) ++result.correct;

    double sum_exp = 0.0;
    if (dlogits) {
      float* d = dlogits + i * classes;
      for (int64_t j = 0; j < classes; ++j) {
        d[j] = std::exp(x[j] - row_max);  // kept to turn into softmax below
        sum_exp += d[j];
      }
      const float inv = static_cast<float>(1.0 / sum_exp) * grad_scale;
      for (int64_t j = 0; j < classes; ++j) d[j] *= inv;
      d[label] -= grad_scale;
    } else {
      for (int64_t j = 0; j < classes; ++j) sum_exp += std::exp(x[j] - row_max);
    }
    // -log softmax[label] = log(sum exp(x - max)) - (x[label] - max)
    result.loss_sum += std::log(sum_exp) - (static_cast<double>(x[label]) - row_max);
  }
  return result;
}

}  // namespace mirrored::kernels::cpu
