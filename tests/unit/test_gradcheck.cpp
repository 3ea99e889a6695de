// Analytic gradients against central finite differences (see gradcheck.h for the error
// budget behind kGradTolerance).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "gradcheck.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/builders.h"
#include "mirrored/nn/layers.h"
#include "mirrored/nn/loss.h"

namespace mirrored {
namespace {

using testing::kGradTolerance;
using testing::numerical_grad;
using testing::random_tensor;
using testing::relative_error;
using testing::weighted_sum;

// A Linear layer standing alone on its own arena, inputs of per-sample shape [2, 3].
struct LinearFixture {
  nn::ParameterArena arena;
  nn::Linear layer{4};
  Tensor x, upstream;  // upstream: dL/dy for L = sum(y * upstream)

  LinearFixture() {
    layer.build({2, 3}, "0.linear.", 0, arena);
    arena.allocate(Device::cpu());
    layer.bind(arena);
    Rng rng(21);
    layer.initialize(rng);
    x = random_tensor({5, 2, 3}, rng);
    upstream = random_tensor({5, 4}, rng);
  }
  double loss() { return weighted_sum(layer.forward(x, nn::Mode::kTrain), upstream); }
};

TEST(Gradcheck, LinearWeightBiasAndInput) {
  LinearFixture f;
  f.layer.forward(f.x, nn::Mode::kTrain);
  f.arena.zero_grads();
  const Tensor dx = f.layer.backward(f.upstream, /*need_input_grad=*/true).clone();
  ASSERT_EQ(dx.shape(), f.x.shape());

  const auto loss = [&] { return f.loss(); };
  for (size_t i = 0; i < f.arena.size(); ++i) {
    const std::vector<float> numeric = numerical_grad(f.arena.param(i), loss, 1e-2f);
    const double err = relative_error(f.arena.grad(i).to_vector(), numeric);
    EXPECT_LT(err, kGradTolerance) << f.arena.info(i).name;
  }
  EXPECT_LT(relative_error(dx.to_vector(), numerical_grad(f.x, loss, 1e-2f)), kGradTolerance);
}

TEST(Gradcheck, DetectsAMissingTranspose) {
  // The check has to be able to fail: x^T dy (the weight gradient with the transpose on the
  // wrong side, [in, out] read as [out, in]) must not pass for dy^T x.
  LinearFixture f;
  Tensor wrong({6, 4});
  kernels::gemm(true, false, 1.0f, f.x.reshape({5, 6}), f.upstream, 0.0f, wrong);
  const std::vector<float> numeric = numerical_grad(f.arena.param(0), [&] { return f.loss(); }, 1e-2f);
  EXPECT_GT(relative_error(wrong.to_vector(), numeric), 10 * kGradTolerance);
}

TEST(Gradcheck, Relu) {
  Rng rng(8);
  // Magnitudes in [0.1, 1] with random signs: no input within h of the kink at 0.
  Tensor x = random_tensor({4, 6}, rng, 0.1f, 1.0f);
  for (int64_t i = 0; i < x.numel(); ++i)
    if (rng.uniform() < 0.5f) x.data<float>()[i] *= -1.0f;
  const Tensor upstream = random_tensor({4, 6}, rng);
  nn::ReLU relu;
  relu.forward(x, nn::Mode::kTrain);
  const Tensor dx = relu.backward(upstream, true).clone();
  const auto loss = [&] { return weighted_sum(relu.forward(x, nn::Mode::kTrain), upstream); };
  EXPECT_LT(relative_error(dx.to_vector(), numerical_grad(x, loss, 1e-2f)), kGradTolerance);
}

TEST(Gradcheck, SoftmaxCrossEntropyLogits) {
  Rng rng(9);
  const Tensor logits = random_tensor({6, 5}, rng, -3.0f, 3.0f);
  Tensor labels({6}, DType::kI32);
  for (int64_t i = 0; i < 6; ++i) labels.data<int32_t>()[i] = static_cast<int32_t>(rng.below(5));
  nn::CrossEntropyLoss ce;
  ce.forward(logits, labels);
  const Tensor analytic = ce.grad().clone();
  const auto loss = [&] { return kernels::softmax_cross_entropy(logits, labels, nullptr, 0.0f).loss_sum / 6.0; };
  EXPECT_LT(relative_error(analytic.to_vector(), numerical_grad(logits, loss, 1e-2f)), kGradTolerance);
}

TEST(Gradcheck, MlpEndToEndEveryParameter) {
  nn::Model model = nn::mlp({.hidden = {7}, .num_classes = 4});
  model.build({2, 3});
  model.initialize(42);
  Rng rng(10);
  const Tensor x = random_tensor({8, 2, 3}, rng, -2.0f, 2.0f);
  Tensor labels({8}, DType::kI32);
  for (int64_t i = 0; i < 8; ++i) labels.data<int32_t>()[i] = static_cast<int32_t>(rng.below(4));

  nn::CrossEntropyLoss ce;
  nn::ParameterArena& arena = model.parameters();
  arena.zero_grads();
  ce.forward(model.forward(x, nn::Mode::kTrain), labels);
  model.backward(ce.grad());

  const auto loss = [&] {
    return ce.forward(model.forward(x, nn::Mode::kTrain), labels, /*with_grad=*/false).loss_sum / 8.0;
  };
  ASSERT_EQ(arena.size(), 4u);
  for (size_t i = 0; i < arena.size(); ++i) {
    // A smaller step here: ReLU kinks inside the network are not under the test's control.
    const std::vector<float> numeric = numerical_grad(arena.param(i), loss, 1e-3f);
    const double err = relative_error(arena.grad(i).to_vector(), numeric);
    EXPECT_LT(err, kGradTolerance) << arena.info(i).name;
    double norm = 0.0;
    for (float g : numeric) norm += std::abs(g);
    EXPECT_GT(norm, 1e-3) << arena.info(i).name << " has no gradient to check";
  }
}

}  // namespace
}  // namespace mirrored
