// Every kernel against a naive reference loop or a value worked out by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "gradcheck.h"
#include "mirrored/core/error.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored {
namespace {

using testing::random_tensor;

float at(const Tensor& t, int64_t row, int64_t col) { return t.data<float>()[row * t.dim(1) + col]; }

// c = alpha op(a) op(b) + beta c with three plain loops, accumulated in double.
std::vector<float> naive_gemm(bool ta, bool tb, float alpha, const Tensor& a, const Tensor& b, float beta,
                              const Tensor& c) {
  const int64_t m = c.dim(0), n = c.dim(1), k = ta ? a.dim(0) : a.dim(1);
  std::vector<float> out(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        const float av = ta ? at(a, p, i) : at(a, i, p);
        const float bv = tb ? at(b, j, p) : at(b, p, j);
        sum += static_cast<double>(av) * bv;
      }
      out[static_cast<size_t>(i * n + j)] = static_cast<float>(alpha * sum + beta * at(c, i, j));
    }
  }
  return out;
}

class GemmTest : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(GemmTest, MatchesNaiveLoopWithAlphaAndBeta) {
  const auto [ta, tb] = GetParam();
  const int64_t m = 3, n = 5, k = 7;  // all different, so a wrong transpose cannot pass
  Rng rng(11);
  const Tensor a = random_tensor(ta ? Shape{k, m} : Shape{m, k}, rng);
  const Tensor b = random_tensor(tb ? Shape{n, k} : Shape{k, n}, rng);
  Tensor c = random_tensor({m, n}, rng);
  const std::vector<float> expected = naive_gemm(ta, tb, 1.5f, a, b, 0.5f, c);
  kernels::gemm(ta, tb, 1.5f, a, b, 0.5f, c);
  const std::vector<float> got = c.to_vector();
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-5f) << "element " << i;
}

INSTANTIATE_TEST_SUITE_P(AllTransposes, GemmTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()));

TEST(Gemm, RejectsMismatchedShapes) {
  Tensor a({3, 4}), b({5, 2}), c({3, 2});
  EXPECT_THROW(kernels::gemm(false, false, 1.0f, a, b, 0.0f, c), Error);
  Tensor b_ok({4, 2}), c_bad({2, 3});
  EXPECT_THROW(kernels::gemm(false, false, 1.0f, a, b_ok, 0.0f, c_bad), Error);
}

TEST(Gemm, EmptyInnerDimensionScalesC) {
  Tensor a({2, 0}), b({0, 3});
  Tensor c = Tensor::from({1, 2, 3, 4, 5, 6}, {2, 3});
  kernels::gemm(false, false, 1.0f, a, b, 2.0f, c);
  EXPECT_EQ(c.to_vector(), (std::vector<float>{2, 4, 6, 8, 10, 12}));
}

TEST(Bias, AddAndGradientMatchLoops) {
  Rng rng(3);
  Tensor y = random_tensor({4, 3}, rng);
  const Tensor bias = random_tensor({3}, rng);
  const std::vector<float> y0 = y.to_vector(), b = bias.to_vector();
  kernels::add_bias(y, bias);
  const std::vector<float> y1 = y.to_vector();
  for (size_t i = 0; i < 4; ++i)
    for (size_t j = 0; j < 3; ++j) EXPECT_FLOAT_EQ(y1[i * 3 + j], y0[i * 3 + j] + b[j]);

  // Accumulates: starts from a non-zero gradient.
  Tensor dbias = Tensor::from({1.0f, -1.0f, 0.5f}, {3});
  kernels::accumulate_bias_grad(y, dbias);
  const std::vector<float> db = dbias.to_vector();
  const std::vector<float> start = {1.0f, -1.0f, 0.5f};
  for (size_t j = 0; j < 3; ++j) {
    double sum = start[j];
    for (size_t i = 0; i < 4; ++i) sum += y1[i * 3 + j];
    EXPECT_NEAR(db[j], sum, 1e-6);
  }
  Tensor wrong({4});
  EXPECT_THROW(kernels::add_bias(y, wrong), Error);
}

TEST(Relu, ForwardAndBackward) {
  const Tensor x = Tensor::from({-2.0f, -0.0f, 0.0f, 0.5f, 3.0f, -1e-30f}, {2, 3});
  Tensor y({2, 3});
  kernels::relu_forward(x, y);
  EXPECT_EQ(y.to_vector(), (std::vector<float>{0, 0, 0, 0.5f, 3.0f, 0}));
  const Tensor dy = Tensor::from({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor dx({2, 3});
  kernels::relu_backward(y, dy, dx);
  EXPECT_EQ(dx.to_vector(), (std::vector<float>{0, 0, 0, 4, 5, 0}));

  // In place, as the header allows.
  Tensor z = x.clone();
  kernels::relu_forward(z, z);
  EXPECT_EQ(z.to_vector(), y.to_vector());
}

Tensor labels_tensor(const std::vector<int32_t>& values) {
  Tensor t({static_cast<int64_t>(values.size())}, DType::kI32);
  std::copy(values.begin(), values.end(), t.data<int32_t>());
  return t;
}

TEST(CrossEntropy, LossCountAndGradientByHand) {
  const Tensor logits = Tensor::from({1, 2, 3,    // label 2: arg-max 2, correct
                                      1, 1, 1,    // label 0: a three-way tie goes to index 0, correct
                                      5, 5, 0},   // label 1: the tie goes to index 0, wrong
                                     {3, 3});
  const Tensor labels = labels_tensor({2, 0, 1});
  Tensor dlogits({3, 3});
  const float scale = 1.0f / 3.0f;
  const kernels::CrossEntropyResult r = kernels::softmax_cross_entropy(logits, labels, &dlogits, scale);

  const double e = std::exp(1.0);
  const double row0 = std::log(1.0 + e + e * e) - 2.0;  // log(e + e^2 + e^3) - 3
  const double row1 = std::log(3.0);
  const double row2 = std::log(2.0 + std::exp(-5.0));
  EXPECT_NEAR(r.loss_sum, row0 + row1 + row2, 1e-6);
  EXPECT_EQ(r.correct, 2);

  const double z0 = 1.0 + e + e * e;
  const double z2 = 2.0 + std::exp(-5.0);
  const std::vector<double> expected = {
      1.0 / z0 * scale, e / z0 * scale, (e * e / z0 - 1.0) * scale,
      (1.0 / 3.0 - 1.0) * scale, 1.0 / 3.0 * scale, 1.0 / 3.0 * scale,
      1.0 / z2 * scale, (1.0 / z2 - 1.0) * scale, std::exp(-5.0) / z2 * scale};
  const std::vector<float> got = dlogits.to_vector();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-6) << "element " << i;

  // Without a gradient buffer the loss and count are the same.
  const kernels::CrossEntropyResult r2 = kernels::softmax_cross_entropy(logits, labels, nullptr, scale);
  EXPECT_DOUBLE_EQ(r2.loss_sum, r.loss_sum);
  EXPECT_EQ(r2.correct, r.correct);
}

TEST(CrossEntropy, MatchesNaiveLoopOnRandomLogits) {
  Rng rng(5);
  const int64_t n = 17, c = 10;
  const Tensor logits = random_tensor({n, c}, rng, -4.0f, 4.0f);
  std::vector<int32_t> label_values;
  for (int64_t i = 0; i < n; ++i) label_values.push_back(static_cast<int32_t>(rng.below(c)));
  Tensor dlogits({n, c});
  const auto r = kernels::softmax_cross_entropy(logits, labels_tensor(label_values), &dlogits, 0.25f);

  double loss = 0.0;
  int64_t correct = 0;
  const std::vector<float> d = dlogits.to_vector();
  for (int64_t i = 0; i < n; ++i) {
    double z = 0.0;
    int64_t best = 0;
    for (int64_t j = 0; j < c; ++j) {
      z += std::exp(static_cast<double>(at(logits, i, j)));
      if (at(logits, i, j) > at(logits, i, best)) best = j;
    }
    const int32_t y = label_values[static_cast<size_t>(i)];
    loss += -std::log(std::exp(static_cast<double>(at(logits, i, y))) / z);
    correct += best == y;
    for (int64_t j = 0; j < c; ++j) {
      const double expected = (std::exp(static_cast<double>(at(logits, i, j))) / z - (j == y)) * 0.25;
      EXPECT_NEAR(d[static_cast<size_t>(i * c + j)], expected, 1e-6);
    }
  }
  EXPECT_NEAR(r.loss_sum, loss, 1e-5);
  EXPECT_EQ(r.correct, correct);
}

TEST(CrossEntropy, StableForHugeLogits) {
  const Tensor logits = Tensor::from({1000.0f, 0.0f, -1000.0f, -1000.0f, 1000.0f, 999.0f}, {2, 3});
  Tensor dlogits({2, 3});
  const auto r = kernels::softmax_cross_entropy(logits, labels_tensor({0, 2}), &dlogits, 1.0f);
  EXPECT_TRUE(std::isfinite(r.loss_sum));
  EXPECT_NEAR(r.loss_sum, 0.0 + (std::log(1.0 + std::exp(-1.0))) + 1.0, 1e-5);
  EXPECT_TRUE(kernels::all_finite(dlogits));
}

TEST(CrossEntropy, RejectsBadLabels) {
  const Tensor logits({2, 3});
  Tensor dlogits({2, 3});
  EXPECT_THROW(kernels::softmax_cross_entropy(logits, labels_tensor({0, 3}), &dlogits, 1.0f), Error);
  EXPECT_THROW(kernels::softmax_cross_entropy(logits, labels_tensor({-1, 0}), &dlogits, 1.0f), Error);
  EXPECT_THROW(kernels::softmax_cross_entropy(logits, labels_tensor({0}), &dlogits, 1.0f), Error);
  const Tensor float_labels({2});
  EXPECT_THROW(kernels::softmax_cross_entropy(logits, float_labels, &dlogits, 1.0f), Error);
}

TEST(Elementwise, ScaleAxpyCopy) {
  Tensor x = Tensor::from({1, -2, 3, 0.5f}, {4});
  kernels::scale(x, -2.0f);
  EXPECT_EQ(x.to_vector(), (std::vector<float>{-2, 4, -6, -1}));

  Tensor y = Tensor::from({1, 1, 1, 1}, {4});
  kernels::axpy(0.5f, x, y);
  EXPECT_EQ(y.to_vector(), (std::vector<float>{0, 3, -2, 0.5f}));

  Tensor dst({2, 2});
  const Tensor src = y.reshape({2, 2});
  kernels::copy(src, dst);
  EXPECT_EQ(dst.to_vector(), y.to_vector());
  Tensor wrong({3});
  EXPECT_THROW(kernels::copy(src, wrong), Error);
  EXPECT_THROW(kernels::axpy(1.0f, x, wrong), Error);
}

TEST(Elementwise, AllFiniteSeesNanAndInfAnywhere) {
  Tensor x({10000});
  EXPECT_TRUE(kernels::all_finite(x));
  x.data<float>()[9999] = std::numeric_limits<float>::max();
  EXPECT_TRUE(kernels::all_finite(x));
  x.data<float>()[5000] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(kernels::all_finite(x));
  x.data<float>()[5000] = 0.0f;
  x.data<float>()[9999] = -std::numeric_limits<float>::infinity();
  EXPECT_FALSE(kernels::all_finite(x));
  x.data<float>()[9999] = 0.0f;
  x.data<float>()[0] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(kernels::all_finite(x));
}

TEST(Threads, SetAndRead) {
  kernels::set_cpu_threads(1);
  EXPECT_EQ(kernels::cpu_threads(), 1);
  EXPECT_THROW(kernels::set_cpu_threads(0), Error);
}

}  // namespace
}  // namespace mirrored
