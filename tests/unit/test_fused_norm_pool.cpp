// Batch norm, 2x2 max pool and relu fused (kernels.h: batch_norm_max_pool_relu_*; the
// model fuses them on the CPU): the same bits as the three layers apart, forward and
// backward, ties and negative or zero gammas included, and on odd planes whose last row
// and column the pool drops.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "devices.h"
#include "gradcheck.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/builders.h"
#include "mirrored/nn/conv.h"
#include "mirrored/nn/layers.h"
#include "mirrored/nn/loss.h"

namespace mirrored {
namespace {

using testing::random_tensor;

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  return a.bytes() == 0 || std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

// Values on a grid of quarters, so that pooling windows hold ties.
Tensor grid_tensor(const Shape& shape, Rng& rng) {
  Tensor t = random_tensor(shape, rng, -2.0f, 2.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = std::round(t.data<float>()[i] * 4.0f) / 4.0f;
  return t;
}

Tensor vector_of(std::vector<float> v) {
  const auto n = static_cast<int64_t>(v.size());
  return Tensor::from(std::move(v), {n});
}

void expect_kernels_keep_the_layers_bits(const Shape& shape, uint64_t seed) {
  SCOPED_TRACE(shape_str(shape));
  Rng rng(seed);
  const int64_t c = shape[1];
  const Tensor x = grid_tensor(shape, rng);
  std::vector<float> gammas, betas;
  for (int64_t ch = 0; ch < c; ++ch) {
    gammas.push_back(ch % 3 == 0 ? -0.75f : (ch % 3 == 1 ? 0.0f : 1.25f));  // decreasing, flat, increasing
    betas.push_back(0.1f * static_cast<float>(ch) - 0.2f);
  }
  const Tensor gamma = vector_of(gammas), beta = vector_of(betas);
  Tensor shift({c}), sums({2 * c + 1}), mean({c}), invstd({c}), running_mean({c}), running_var({c});
  shift.zero();
  running_mean.zero();
  running_var.zero();
  kernels::batch_norm_sums(x, shift, sums);
  kernels::batch_norm_statistics(sums, shift, 1e-5f, 0.1f, mean, invstd, running_mean, running_var);

  // The three layers' kernels, one after the other.
  const kernels::Pool2dParams pool{2, 2, 2, 0};
  const Shape pooled = {shape[0], c, shape[2] / 2, shape[3] / 2};
  Tensor normalised(shape), pooled_apart(pooled), argmax_apart(pooled, DType::kI32), y_apart(pooled);
  kernels::batch_norm_apply(x, mean, invstd, gamma, beta, normalised);
  kernels::max_pool2d_forward(normalised, pool, pooled_apart, argmax_apart);
  kernels::relu_forward(pooled_apart, y_apart);
  // Fused.
  Tensor y(pooled), argmax(pooled, DType::kI32);
  kernels::batch_norm_max_pool_relu_forward(x, mean, invstd, gamma, beta, y, argmax);
  EXPECT_TRUE(same_bits(y, y_apart));
  EXPECT_TRUE(same_bits(argmax, argmax_apart));

  // Backward, with dy on the grid too: sums of exact values expose no reordering by
  // rounding, so the upstream gradient is random instead.
  const Tensor dy = random_tensor(pooled, rng);
  Tensor relu_grad(pooled), pool_grad(shape), grad_sums_apart({2 * c + 1}), dx_apart(shape);
  kernels::relu_backward(y_apart, dy, relu_grad);
  kernels::max_pool2d_backward(relu_grad, argmax_apart, pool, pool_grad);
  kernels::batch_norm_backward_sums(x, pool_grad, mean, invstd, grad_sums_apart);
  kernels::batch_norm_backward_input(x, pool_grad, mean, invstd, gamma, grad_sums_apart, dx_apart);
  Tensor grad_sums({2 * c + 1}), dx(shape);
  kernels::batch_norm_max_pool_relu_backward_sums(x, y, dy, argmax, mean, invstd, grad_sums);
  kernels::batch_norm_max_pool_relu_backward_input(x, y, dy, argmax, mean, invstd, gamma, grad_sums, dx);
  EXPECT_TRUE(same_bits(grad_sums, grad_sums_apart));
  EXPECT_TRUE(same_bits(dx, dx_apart));
}

TEST(FusedNormPoolRelu, KernelsKeepTheBitsOfTheThreeLayers) {
  expect_kernels_keep_the_layers_bits({3, 5, 8, 8}, 1);
  expect_kernels_keep_the_layers_bits({2, 4, 7, 9}, 2);     // the pool drops a row and a column
  expect_kernels_keep_the_layers_bits({4, 3, 24, 24}, 3);   // planes of 576: whole lanes, no tail
  expect_kernels_keep_the_layers_bits({1, 2, 2, 2}, 4);     // one window a plane
}

TEST(FusedNormPoolRelu, RefusesShapesItCannotPool) {
  Tensor x({2, 3, 1, 4}), y({2, 3, 0, 2}), argmax({2, 3, 0, 2}, DType::kI32), v({3});
  EXPECT_THROW(kernels::batch_norm_max_pool_relu_forward(x, v, v, v, v, y, argmax), Error);
  Tensor x2({2, 3, 4, 4}), wrong({2, 3, 4, 4}), argmax2({2, 3, 2, 2}, DType::kI32);
  EXPECT_THROW(kernels::batch_norm_max_pool_relu_forward(x2, v, v, v, v, wrong, argmax2), Error);
}

// A model, fused as build() fuses it on the CPU and apart: the same output, loss gradient
// and every parameter gradient, bit for bit, through three training steps and evaluation.
TEST(FusedNormPoolRelu, CnnFusedAndApartGiveTheSameBits) {
  nn::CnnSpec spec;
  spec.channels = {4, 6};
  spec.kernel = 3;
  spec.padding = 1;
  spec.hidden = {8};
  spec.batchnorm = true;
  spec.num_classes = 5;
  const Shape sample = {1, 12, 12};
  nn::Model fused = nn::cnn(spec), apart = nn::cnn(spec);
  apart.set_layer_fusion(false);
  for (nn::Model* m : {&fused, &apart}) {
    m->build(sample);
    m->initialize(17);
  }
  // conv, batchnorm, maxpool, relu per stage: the pool and relu run inside the batch norm.
  ASSERT_EQ(fused.layer(1).kind(), "batchnorm");
  ASSERT_EQ(fused.layer(2).kind(), "maxpool");
  ASSERT_EQ(fused.layer(3).kind(), "relu");
  EXPECT_EQ(fused.computed_by(1), 1u);
  EXPECT_EQ(fused.computed_by(2), 1u);
  EXPECT_EQ(fused.computed_by(3), 1u);
  EXPECT_EQ(fused.computed_by(6), 5u);
  EXPECT_EQ(fused.computed_by(7), 5u);
  for (size_t i = 0; i < apart.num_layers(); ++i) EXPECT_EQ(apart.computed_by(i), i);

  Rng rng(5);
  const int64_t batch = 6;
  Tensor labels({batch}, DType::kI32);
  for (int64_t i = 0; i < batch; ++i) labels.data<int32_t>()[i] = static_cast<int32_t>(rng.below(5));
  nn::CrossEntropyLoss loss_fused, loss_apart;
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE(step);
    const Tensor x = random_tensor({batch, 1, 12, 12}, rng);
    for (nn::Model* m : {&fused, &apart}) m->parameters().zero_grads();
    const Tensor& out_fused = fused.forward(x, nn::Mode::kTrain);
    const Tensor& out_apart = apart.forward(x, nn::Mode::kTrain);
    ASSERT_TRUE(same_bits(out_fused, out_apart));
    loss_fused.forward(out_fused, labels);
    loss_apart.forward(out_apart, labels);
    fused.backward(loss_fused.grad());
    apart.backward(loss_apart.grad());
    nn::ParameterArena& a = fused.parameters();
    nn::ParameterArena& b = apart.parameters();
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same_bits(a.grad(i), b.grad(i))) << a.info(i).name;
    // A plain SGD step on both, so the next step starts from moved weights.
    for (size_t i = 0; i < a.size(); ++i) {
      Tensor pa = a.param(i), pb = b.param(i);
      kernels::axpy(-0.1f, a.grad(i), pa);
      kernels::axpy(-0.1f, b.grad(i), pb);
    }
  }
  const Tensor x = random_tensor({batch, 1, 12, 12}, rng);
  EXPECT_TRUE(same_bits(fused.forward(x, nn::Mode::kEval), apart.forward(x, nn::Mode::kEval)));
}

TEST(FusedNormPoolRelu, OnlyThePoolThenReluOrder) {
  nn::BatchNorm2d bn;
  nn::MaxPool2d pool(2);
  nn::ReLU relu;
  EXPECT_EQ(bn.fuse_following({&relu, &pool}, Device::cpu()), 0u);  // relu first: not this pattern
  EXPECT_EQ(bn.fuse_following({&pool}, Device::cpu()), 0u);
  EXPECT_EQ(bn.fuse_following({&pool, &relu}, Device::cpu()), 2u);
}

// Built on the CPU the cnn fuses; on a GPU, which has no fused kernels, it runs the three
// layers apart.
class FusedNormPoolReluOn : public testing::DeviceTest {};

TEST_P(FusedNormPoolReluOn, OnlyTheCpuFuses) {
  nn::CnnSpec spec;
  spec.channels = {3};
  spec.kernel = 3;
  spec.hidden = {};
  spec.batchnorm = true;
  spec.num_classes = 2;
  nn::Model model = nn::cnn(spec);
  model.build({1, 8, 8}, device());
  ASSERT_EQ(model.layer(2).kind(), "maxpool");
  if (device().is_cpu()) {
    EXPECT_EQ(model.computed_by(2), 1u);
    EXPECT_EQ(model.computed_by(3), 1u);
  } else {
    EXPECT_EQ(model.computed_by(2), 2u);
    EXPECT_EQ(model.computed_by(3), 3u);
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, FusedNormPoolReluOn, ::testing::ValuesIn(testing::kTestDevices),
                         testing::device_name);

TEST(FusedNormPoolRelu, OnlyA2x2PoolThenReluIsFused) {
  nn::CnnSpec spec;
  spec.channels = {3};
  spec.kernel = 3;
  spec.pool = 3;
  spec.hidden = {};
  spec.batchnorm = true;
  spec.num_classes = 2;
  nn::Model model = nn::cnn(spec);
  model.build({1, 9, 9});
  for (size_t i = 0; i < model.num_layers(); ++i) EXPECT_EQ(model.computed_by(i), i) << model.layer(i).kind();
}

}  // namespace
}  // namespace mirrored
