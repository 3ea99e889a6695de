// The clip applied inside the optimizer update (kernels::clip_factor, the updates'
// grad_scale, Optimizer::scale_gradients_by) against what it replaces: scale_by_clip over
// the gradient, then the plain update. Bit for bit, at every length up to a few vectors of
// 16 floats past a whole one (the AVX-512 clone's body and its scalar tail), and over
// several steps so the moments carry the scaled gradients forward. On the CPU always, on
// the GPU when one is present.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "devices.h"
#include "mirrored/distribute/gradient_clipper.h"
#include "mirrored/kernels/clip_math.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/kernels/optimizer_math.h"
#include "mirrored/nn/parameter_arena.h"
#include "mirrored/optim/optimizer.h"

namespace mirrored {
namespace {

class ClippedUpdate : public testing::DeviceTest {};

// Values with every exponent the update meets, some of them tiny or large enough to move
// the last bit of a product.
std::vector<float> values(int64_t n, float seed, float magnitude) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = std::sin(seed + 0.731f * static_cast<float>(i)) * magnitude * std::exp2(static_cast<float>(i % 7) - 3.0f);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  // Empty vectors are equal without memcmp, which may not be given their null data().
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// The state one update changes: parameters and up to two state buffers.
struct UpdateState {
  Tensor param, grad, first, second;
  UpdateState(int64_t n, Device device) {
    auto make = [&](const std::vector<float>& v) { return testing::to_device(Tensor::from(v, {n}), device); };
    param = make(values(n, 0.3f, 1.0f));
    grad = make(values(n, 1.1f, 5.0f));  // a norm well above max_norm below: the clip scales
    first = make(std::vector<float>(static_cast<size_t>(n), 0.0f));
    second = make(std::vector<float>(static_cast<size_t>(n), 0.0f));
  }
};

// Runs `update(state, grad_scale)` for three steps two ways (the gradient scaled by
// scale_by_clip first, then grad_scale null; the gradient untouched and the factor passed)
// and expects the same bits in every buffer, and the same norm.
template <class Update>
void expect_fused_equals_two_passes(Device device, const Update& update) {
  const float max_norm = 0.25f;
  for (int64_t n = 0; n <= 70; ++n) {
    UpdateState two_passes(n, device), fused(n, device);
    Tensor squares({1}, DType::kF32, device), workspace;
    Tensor norm_a({1}, DType::kF32, device), norm_b({1}, DType::kF32, device), factor({1}, DType::kF32, device);
    for (int step = 1; step <= 3; ++step) {
      kernels::sum_squares(two_passes.grad, squares, workspace);
      kernels::scale_by_clip(two_passes.grad, squares, max_norm, norm_a);
      update(two_passes, step, nullptr);
      kernels::sum_squares(fused.grad, squares, workspace);
      kernels::clip_factor(squares, max_norm, norm_b, factor);
      update(fused, step, &factor);
      ASSERT_TRUE(same_bits(norm_a.to_vector(), norm_b.to_vector())) << "n " << n << " step " << step;
      ASSERT_TRUE(same_bits(two_passes.param.to_vector(), fused.param.to_vector())) << "n " << n << " step " << step;
      ASSERT_TRUE(same_bits(two_passes.first.to_vector(), fused.first.to_vector())) << "n " << n << " step " << step;
      ASSERT_TRUE(same_bits(two_passes.second.to_vector(), fused.second.to_vector())) << "n " << n << " step " << step;
      // Fresh gradients for the next step: the fused side's are untouched, the other's scaled.
      kernels::copy(fused.grad, two_passes.grad);
    }
    if (n > 0) ASSERT_LT(factor.to_vector()[0], 1.0f) << "the case must clip (n " << n << ")";
  }
}

TEST_P(ClippedUpdate, AdamWithTheFactorIsScalingThenAdamBitForBit) {
  for (const bool decoupled : {false, true}) {
    kernels::AdamHyper hyper;
    hyper.lr = 3e-3f;
    hyper.weight_decay = 0.1f;
    hyper.decoupled_weight_decay = decoupled;
    expect_fused_equals_two_passes(device(), [&](UpdateState& s, int step, const Tensor* factor) {
      kernels::adam_update(s.param, s.grad, s.first, s.second, hyper, step, nullptr, factor);
    });
  }
}

TEST_P(ClippedUpdate, SgdWithTheFactorIsScalingThenSgdBitForBit) {
  for (const float momentum : {0.0f, 0.9f}) {
    for (const bool nesterov : {false, true}) {
      if (nesterov && momentum == 0.0f) continue;
      kernels::SgdHyper hyper;
      hyper.lr = 0.05f;
      hyper.momentum = momentum;
      hyper.weight_decay = 1e-3f;
      hyper.nesterov = nesterov;
      expect_fused_equals_two_passes(device(), [&](UpdateState& s, int, const Tensor* factor) {
        kernels::sgd_update(s.param, s.grad, s.first, hyper, nullptr, factor);
      });
    }
  }
}

// The CPU update against the shared element formula written out here, at every length
// around the vector widths: each SIMD clone (and its tail) gives the formula's bits.
TEST(ClippedUpdateCpu, AdamFollowsTheElementFormulaAtEveryLength) {
  kernels::AdamHyper hyper;
  hyper.lr = 1e-3f;
  hyper.weight_decay = 0.1f;
  hyper.decoupled_weight_decay = true;
  const float scale = 0.0173f;
  for (int64_t n = 1; n <= 70; ++n) {
    const std::vector<float> p0 = values(n, 0.3f, 1.0f), g = values(n, 1.1f, 5.0f), m0 = values(n, 2.0f, 0.1f);
    std::vector<float> v0 = values(n, 2.5f, 0.01f);
    for (float& x : v0) x = x * x;
    std::vector<float> p = p0, m = m0, v = v0;
    const kernels::AdamStep s = kernels::adam_step(hyper, 4);
    for (size_t i = 0; i < p.size(); ++i) p[i] = kernels::adam_element_step(p[i], g[i] * scale, m[i], v[i], s);
    Tensor param = Tensor::from(p0, {n}), grad = Tensor::from(g, {n}), tm = Tensor::from(m0, {n}),
           tv = Tensor::from(v0, {n}), factor = Tensor::from({scale}, {1});
    kernels::adam_update(param, grad, tm, tv, hyper, 4, nullptr, &factor);
    ASSERT_TRUE(same_bits(param.to_vector(), p)) << n;
    ASSERT_TRUE(same_bits(tm.to_vector(), m)) << n;
    ASSERT_TRUE(same_bits(tv.to_vector(), v)) << n;
    ASSERT_TRUE(same_bits(grad.to_vector(), g)) << "the gradient stays as it was (n " << n << ")";
  }
}

// Through the optimizer and the clipper: Optimizer::scale_gradients_by with
// GradientClipper::factor updates as GradientClipper::clip then step() did.
TEST(ClippedUpdateCpu, OptimizerWithTheClippersFactorMatchesClipThenStep) {
  auto arena_with = [](const std::vector<float>& p) {
    auto arena = std::make_unique<nn::ParameterArena>();
    arena->declare("0.linear.weight", {static_cast<int64_t>(p.size()) - 3, 1}, 0);
    arena->declare("0.linear.bias", {3}, 0);
    arena->allocate(Device::cpu());
    std::memcpy(arena->flat_params().data<float>(), p.data(), p.size() * sizeof(float));
    return arena;
  };
  const int64_t n = 53;
  auto a = arena_with(values(n, 0.3f, 1.0f)), b = arena_with(values(n, 0.3f, 1.0f));
  kernels::AdamHyper hyper;
  hyper.weight_decay = 0.1f;
  hyper.decoupled_weight_decay = true;
  optim::Adam adam_a(*a, hyper), adam_b(*b, hyper);
  distribute::GradientClipper clip_a, clip_b;
  for (int step = 0; step < 4; ++step) {
    const std::vector<float> g = values(n, 1.1f + static_cast<float>(step), 5.0f);
    std::memcpy(a->flat_grads().data<float>(), g.data(), g.size() * sizeof(float));
    std::memcpy(b->flat_grads().data<float>(), g.data(), g.size() * sizeof(float));
    clip_a.clip(a->flat_grads(), 0.5f);
    adam_a.step();
    adam_b.scale_gradients_by(&clip_b.factor(b->flat_grads(), 0.5f));
    adam_b.step();
    ASSERT_TRUE(same_bits(a->flat_params().to_vector(), b->flat_params().to_vector())) << step;
    ASSERT_TRUE(same_bits(clip_a.norm().to_vector(), clip_b.norm().to_vector())) << step;
  }
  EXPECT_EQ(clip_b.factor(b->flat_grads(), 1e9f).to_vector()[0], 1.0f) << "a loose clip: factor 1";
}

TEST(ClippedUpdateChecks, RejectABadFactor) {
  Tensor p({4}), g({4}), m({4}), v({4}), two({2}), ints({1}, DType::kI32), norm({1}), squares({1});
  EXPECT_THROW(kernels::adam_update(p, g, m, v, kernels::AdamHyper{}, 1, nullptr, &two), Error);
  EXPECT_THROW(kernels::sgd_update(p, g, m, kernels::SgdHyper{}, nullptr, &ints), Error);
  EXPECT_THROW(kernels::clip_factor(squares, 0.0f, norm, norm), Error);
  EXPECT_THROW(kernels::clip_factor(squares, 1.0f, norm, two), Error);
}

INSTANTIATE_TEST_SUITE_P(Devices, ClippedUpdate, ::testing::ValuesIn(testing::kTestDevices), testing::device_name);

}  // namespace
}  // namespace mirrored
