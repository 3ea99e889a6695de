// Model plumbing: the arena layout, initialisation, gradient accumulation, hook order and
// buffer reuse.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "gradcheck.h"
#include "mirrored/nn/builders.h"
#include "mirrored/nn/layers.h"
#include "mirrored/nn/loss.h"

namespace mirrored {
namespace {

using testing::random_tensor;

// Per-sample input [2, 3] (flattened to 6 by the first Linear), one hidden layer of 5.
nn::Model small_mlp(uint64_t seed) {
  nn::Model model = nn::mlp({.hidden = {5}, .num_classes = 3});
  model.build({2, 3});
  model.initialize(seed);
  return model;
}

TEST(Model, ArenaLayoutIsContiguousAndNamed) {
  nn::Model model = small_mlp(1);
  ASSERT_EQ(model.num_layers(), 3u);
  EXPECT_EQ(model.layer(0).kind(), "linear");
  EXPECT_EQ(model.layer(1).kind(), "relu");
  EXPECT_EQ(model.output_shape(), Shape({3}));
  EXPECT_EQ(model.input_shape(), Shape({2, 3}));

  const nn::ParameterArena& arena = model.parameters();
  struct Expected {
    const char* name;
    Shape shape;
    int64_t offset;
    size_t layer;
  };
  const std::vector<Expected> expected = {{"0.linear.weight", {5, 6}, 0, 0},
                                          {"0.linear.bias", {5}, 30, 0},
                                          {"2.linear.weight", {3, 5}, 35, 2},
                                          {"2.linear.bias", {3}, 50, 2}};
  ASSERT_EQ(arena.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(arena.info(i).name, expected[i].name);
    EXPECT_EQ(arena.info(i).shape, expected[i].shape);
    EXPECT_EQ(arena.info(i).offset, expected[i].offset);
    EXPECT_EQ(arena.info(i).layer, expected[i].layer);
    // Views point into the flat buffers at the declared offset.
    EXPECT_EQ(arena.param(i).data<float>(), arena.flat_params().data<float>() + expected[i].offset);
    EXPECT_EQ(arena.grad(i).data<float>(), arena.flat_grads().data<float>() + expected[i].offset);
  }
  EXPECT_EQ(arena.numel(), 53);
  EXPECT_EQ(arena.flat_params().numel(), 53);
  EXPECT_EQ(arena.flat_grads().numel(), 53);
}

TEST(Model, ArenaRejectsLateOrDuplicateDeclarations) {
  nn::ParameterArena arena;
  arena.declare("0.linear.weight", {2, 2}, 0);
  EXPECT_THROW(arena.declare("0.linear.weight", {2}, 0), Error);
  arena.allocate(Device::cpu());
  EXPECT_THROW(arena.declare("1.linear.weight", {2}, 1), Error);
}

TEST(Model, InitIsDeterministicPerSeed) {
  const nn::Model a = small_mlp(7), b = small_mlp(7), c = small_mlp(8);
  const Tensor& pa = a.parameters().flat_params();
  const Tensor& pb = b.parameters().flat_params();
  const Tensor& pc = c.parameters().flat_params();
  EXPECT_EQ(std::memcmp(pa.raw(), pb.raw(), pa.bytes()), 0);
  EXPECT_NE(std::memcmp(pa.raw(), pc.raw(), pa.bytes()), 0);

  // PyTorch nn.Linear bounds: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias.
  const nn::ParameterArena& arena = a.parameters();
  const std::vector<double> fan_in = {6, 6, 5, 5};
  for (size_t i = 0; i < arena.size(); ++i) {
    const double bound = 1.0 / std::sqrt(fan_in[i]);
    double max_abs = 0.0;
    for (float v : arena.param(i).to_vector()) max_abs = std::max(max_abs, std::abs(static_cast<double>(v)));
    EXPECT_LE(max_abs, bound) << arena.info(i).name;
    EXPECT_GT(max_abs, 0.3 * bound) << arena.info(i).name << " looks unused or mis-scaled";
  }
}

TEST(Model, GradientsAccumulateUntilZeroed) {
  nn::Model model = small_mlp(3);
  Rng rng(4);
  const Tensor x = random_tensor({4, 2, 3}, rng);
  const Tensor dy = random_tensor({4, 3}, rng);
  nn::ParameterArena& arena = model.parameters();

  arena.zero_grads();
  model.forward(x, nn::Mode::kTrain);
  model.backward(dy);
  const std::vector<float> once = arena.flat_grads().to_vector();

  model.forward(x, nn::Mode::kTrain);
  model.backward(dy);
  const std::vector<float> twice = arena.flat_grads().to_vector();
  double norm = 0.0;
  for (size_t i = 0; i < once.size(); ++i) {
    EXPECT_NEAR(twice[i], 2.0f * once[i], 1e-6f * std::max(1.0f, std::abs(once[i]))) << "element " << i;
    norm += std::abs(once[i]);
  }
  EXPECT_GT(norm, 0.0);

  arena.zero_grads();
  for (float g : arena.flat_grads().to_vector()) EXPECT_EQ(g, 0.0f);
}

TEST(Model, BackwardHookRunsInReverseLayerOrder) {
  nn::Model model = small_mlp(3);
  Rng rng(4);
  const Tensor x = random_tensor({2, 2, 3}, rng);
  model.forward(x, nn::Mode::kTrain);
  std::vector<size_t> order;
  model.backward(random_tensor({2, 3}, rng), [&](size_t layer) { order.push_back(layer); });
  EXPECT_EQ(order, (std::vector<size_t>{2, 1, 0}));
}

TEST(Model, SteadyStateReusesBuffers) {
  nn::Model model = small_mlp(3);
  nn::CrossEntropyLoss ce;
  Rng rng(6);
  const Tensor x = random_tensor({8, 2, 3}, rng);
  Tensor labels({8}, DType::kI32);

  // One step, then the addresses of every per-step buffer the step touches.
  const auto step = [&] {
    ce.forward(model.forward(x, nn::Mode::kTrain), labels);
    model.backward(ce.grad());
  };
  const auto buffers = [&] {
    return std::vector<const float*>{model.forward(x, nn::Mode::kTrain).data<float>(),
                                     ce.grad().data<float>(),
                                     model.layer(2).backward(ce.grad(), true).data<float>(),
                                     model.layer(1).backward(model.layer(2).backward(ce.grad(), true), true)
                                         .data<float>()};
  };
  step();
  const std::vector<const float*> first = buffers();
  step();
  EXPECT_EQ(buffers(), first);

  // A smaller last batch is a view of the same output buffer.
  const Tensor& small = model.forward(x.narrow_rows(3), nn::Mode::kTrain);
  EXPECT_EQ(small.shape(), Shape({3, 3}));
  EXPECT_EQ(small.data<float>(), first[0]);
}

TEST(Model, SummaryHasOneLinePerLayer) {
  const nn::Model model = small_mlp(1);
  const std::string summary = model.summary();
  EXPECT_EQ(std::count(summary.begin(), summary.end(), '\n'), 3);
  EXPECT_NE(summary.find("linear"), std::string::npos);
  EXPECT_NE(summary.find("35"), std::string::npos);  // 5 * 6 + 5 parameters in layer 0
}

TEST(Model, LinearKeepsThePerSampleShapeInItsInputGradient) {
  nn::ParameterArena arena;
  nn::Linear layer(4);
  layer.build({2, 3}, "0.linear.", 0, arena);
  arena.allocate(Device::cpu());
  layer.bind(arena);
  Rng rng(1);
  const Tensor x = random_tensor({5, 2, 3}, rng);
  EXPECT_EQ(layer.forward(x, nn::Mode::kTrain).shape(), Shape({5, 4}));
  EXPECT_EQ(layer.backward(random_tensor({5, 4}, rng), true).shape(), Shape({5, 2, 3}));
  EXPECT_THROW(layer.forward(random_tensor({5, 7}, rng), nn::Mode::kTrain), Error);
}

}  // namespace
}  // namespace mirrored
