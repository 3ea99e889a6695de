// The CPU softmax cross-entropy with its gradient takes rows in groups (the sums of
// exponentials of a group run side by side); against the one-row-at-a-time loop it
// replaced, worked out here with the same shared exponential: the same loss, count and
// gradient, bit for bit, for row counts around the group of 8.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "mirrored/core/rng.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/kernels/transformer_math.h"

namespace mirrored {
namespace {

struct RowsResult {
  double loss_sum = 0.0;
  int64_t correct = 0;
  std::vector<float> grad;
};

RowsResult one_row_at_a_time(const std::vector<float>& x, const std::vector<int32_t>& labels, int64_t classes,
                             float grad_scale) {
  RowsResult out;
  out.grad.resize(x.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    const float* row = x.data() + i * static_cast<size_t>(classes);
    int64_t arg_max = 0;
    float row_max = row[0];
    for (int64_t j = 1; j < classes; ++j)
      if (row[j] > row_max) {
        row_max = row[j];
        arg_max = j;
      }
    if (arg_max == labels[i]) ++out.correct;
    float* d = out.grad.data() + i * static_cast<size_t>(classes);
    double sum_exp = 0.0;
    for (int64_t j = 0; j < classes; ++j) d[j] = kernels::softmax_exp(row[j] - row_max);
    for (int64_t j = 0; j < classes; ++j) sum_exp += d[j];
    const float inv = static_cast<float>(1.0 / sum_exp) * grad_scale;
    for (int64_t j = 0; j < classes; ++j) d[j] *= inv;
    d[labels[i]] -= grad_scale;
    out.loss_sum += std::log(sum_exp) - (static_cast<double>(row[labels[i]]) - row_max);
  }
  return out;
}

TEST(CrossEntropyRows, RowGroupsGiveTheOneRowLoopsBits) {
  Rng rng(21);
  for (const int64_t classes : {1, 10, 256, 1031}) {
    for (const int64_t rows : {1, 7, 8, 9, 17, 768}) {
      std::vector<float> x(static_cast<size_t>(rows * classes));
      for (float& v : x) v = rng.uniform(-6.0f, 6.0f);
      std::vector<int32_t> labels(static_cast<size_t>(rows));
      for (int32_t& l : labels) l = static_cast<int32_t>(rng.below(static_cast<uint64_t>(classes)));
      const float grad_scale = 1.0f / static_cast<float>(rows);
      const RowsResult want = one_row_at_a_time(x, labels, classes, grad_scale);

      Tensor logits = Tensor::from(x, {rows, classes}), targets({rows}, DType::kI32), grad({rows, classes});
      std::memcpy(targets.data<int32_t>(), labels.data(), labels.size() * sizeof(int32_t));
      const kernels::CrossEntropyResult got = kernels::softmax_cross_entropy(logits, targets, &grad, grad_scale);
      EXPECT_EQ(std::memcmp(&got.loss_sum, &want.loss_sum, sizeof(double)), 0)
          << got.loss_sum << " vs " << want.loss_sum << " at " << rows << " x " << classes;
      EXPECT_EQ(got.correct, want.correct) << rows << " x " << classes;
      const std::vector<float> g = grad.to_vector();
      EXPECT_EQ(std::memcmp(g.data(), want.grad.data(), g.size() * sizeof(float)), 0) << rows << " x " << classes;
      // Without the gradient: the same loss and count.
      const kernels::CrossEntropyResult plain = kernels::softmax_cross_entropy(logits, targets, nullptr, grad_scale);
      EXPECT_EQ(std::memcmp(&plain.loss_sum, &want.loss_sum, sizeof(double)), 0) << rows << " x " << classes;
      EXPECT_EQ(plain.correct, want.correct);
    }
  }
}

}  // namespace
}  // namespace mirrored
