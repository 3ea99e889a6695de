// Optimizers against the PyTorch update rules written out as scalar double formulas.
//
// Each test minimises 0.5 * (p - target)^2 over a few steps: the gradient p - target is
// taken from the optimizer's own float parameters, the reference repeats the same steps in
// double, and the two must agree to float precision.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "mirrored/kernels/optimizer_math.h"
#include "mirrored/nn/parameter_arena.h"
#include "mirrored/distribute/shard_plan.h"
#include "mirrored/optim/optimizer.h"

namespace mirrored {
namespace {

const std::vector<double> kStart = {1.0, -2.0, 0.5, 3.0, -0.25};
const std::vector<double> kTarget = {0.0, 1.0, 0.5, -1.0, 2.0};
constexpr int kSteps = 5;

// Two parameters, so the update is seen to cover the whole flat buffer: a 2-D weight
// (elements 0-2, decayed) and a bias (elements 3-4, never decayed).
constexpr size_t kDecayed = 3;
struct Problem {
  nn::ParameterArena arena;
  Problem() {
    arena.declare("0.linear.weight", {3, 1}, 0);
    arena.declare("0.linear.bias", {2}, 0);
    arena.allocate(Device::cpu());
    float* p = arena.flat_params().data<float>();
    for (size_t i = 0; i < kStart.size(); ++i) p[i] = static_cast<float>(kStart[i]);
  }
  void compute_grads() {
    const float* p = arena.flat_params().data<float>();
    float* g = arena.flat_grads().data<float>();
    for (size_t i = 0; i < kTarget.size(); ++i) g[i] = p[i] - static_cast<float>(kTarget[i]);
  }
  std::vector<float> params() const { return arena.flat_params().to_vector(); }
};

void expect_close(const std::vector<float>& got, const std::vector<double>& expected) {
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], expected[i], 1e-5 * std::max(1.0, std::abs(expected[i]))) << "element " << i;
}

std::vector<double> reference_sgd(double lr, double momentum, double wd, bool nesterov) {
  std::vector<double> p = kStart;
  std::vector<double> buf(p.size(), 0.0);
  for (int t = 1; t <= kSteps; ++t) {
    for (size_t i = 0; i < p.size(); ++i) {
      double g = p[i] - kTarget[i];
      if (i < kDecayed) g += wd * p[i];
      if (momentum != 0.0) {
        buf[i] = t == 1 ? g : momentum * buf[i] + g;  // torch: buf = clone(g) on the first step
        g = nesterov ? g + momentum * buf[i] : buf[i];
      }
      p[i] -= lr * g;
    }
  }
  return p;
}

void run_sgd(kernels::SgdHyper hyper) {
  Problem problem;
  optim::Sgd sgd(problem.arena, hyper);
  for (int t = 0; t < kSteps; ++t) {
    problem.compute_grads();
    sgd.step();
  }
  EXPECT_EQ(sgd.steps(), kSteps);
  expect_close(problem.params(), reference_sgd(hyper.lr, hyper.momentum, hyper.weight_decay, hyper.nesterov));
}

TEST(Sgd, OneStepByHand) {
  Problem problem;
  optim::Sgd sgd(problem.arena, {.lr = 0.1f});
  problem.compute_grads();  // g = {1, -3, 0, 4, -2.25}
  sgd.step();
  expect_close(problem.params(), {0.9, -1.7, 0.5, 2.6, -0.025});
}

TEST(Sgd, Plain) { run_sgd({.lr = 0.1f}); }
TEST(Sgd, Momentum) { run_sgd({.lr = 0.1f, .momentum = 0.9f}); }
TEST(Sgd, WeightDecay) { run_sgd({.lr = 0.1f, .momentum = 0.0f, .weight_decay = 0.01f}); }
TEST(Sgd, MomentumWeightDecay) { run_sgd({.lr = 0.05f, .momentum = 0.8f, .weight_decay = 0.1f}); }
TEST(Sgd, Nesterov) { run_sgd({.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f, .nesterov = true}); }

TEST(Sgd, StateIsTheVelocity) {
  Problem problem;
  optim::Sgd sgd(problem.arena, {.lr = 0.1f, .momentum = 0.9f});
  problem.compute_grads();
  sgd.step();
  const auto state = sgd.state();
  ASSERT_EQ(state.size(), 1u);
  EXPECT_EQ(state[0].first, "velocity");
  // After one step the velocity is the gradient.
  expect_close(state[0].second->to_vector(), {1.0, -3.0, 0.0, 4.0, -2.25});
}

std::vector<double> reference_adam(const kernels::AdamHyper& h) {
  const double lr = h.lr, b1 = h.beta1, b2 = h.beta2, eps = h.eps, wd = h.weight_decay;
  std::vector<double> p = kStart;
  std::vector<double> m(p.size(), 0.0), v(p.size(), 0.0);
  for (int t = 1; t <= kSteps; ++t) {
    for (size_t i = 0; i < p.size(); ++i) {
      double g = p[i] - kTarget[i];
      const double decay = i < kDecayed ? wd : 0.0;
      if (h.decoupled_weight_decay) {
        p[i] *= 1.0 - lr * decay;
      } else {
        g += decay * p[i];
      }
      m[i] = b1 * m[i] + (1.0 - b1) * g;
      v[i] = b2 * v[i] + (1.0 - b2) * g * g;
      const double m_hat = m[i] / (1.0 - std::pow(b1, t));
      const double v_hat = v[i] / (1.0 - std::pow(b2, t));
      p[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
    }
  }
  return p;
}

void run_adam(kernels::AdamHyper hyper) {
  Problem problem;
  optim::Adam adam(problem.arena, hyper);
  for (int t = 0; t < kSteps; ++t) {
    problem.compute_grads();
    adam.step();
  }
  EXPECT_EQ(adam.steps(), kSteps);
  expect_close(problem.params(), reference_adam(hyper));
}

TEST(Adam, FirstStepMovesEachParameterByLr) {
  // With m and v at zero, the bias-corrected first step is lr * g / (|g| + eps): a step of
  // lr against the sign of the gradient (and none where the gradient is zero).
  Problem problem;
  optim::Adam adam(problem.arena, {.lr = 0.1f});
  problem.compute_grads();  // g = {1, -3, 0, 4, -2.25}
  adam.step();
  expect_close(problem.params(), {0.9, -1.9, 0.5, 2.9, -0.15});
}

TEST(Adam, Default) { run_adam({.lr = 0.01f}); }
TEST(Adam, CustomBetasAndEps) { run_adam({.lr = 0.05f, .beta1 = 0.8f, .beta2 = 0.99f, .eps = 1e-3f}); }
TEST(Adam, L2WeightDecay) { run_adam({.lr = 0.01f, .weight_decay = 0.1f}); }
TEST(AdamW, DecoupledWeightDecay) {
  run_adam({.lr = 0.01f, .weight_decay = 0.1f, .decoupled_weight_decay = true});
}

TEST(AdamW, DecayDiffersFromL2) {
  Problem l2, decoupled;
  optim::Adam adam(l2.arena, {.lr = 0.1f, .weight_decay = 0.5f});
  optim::Adam adamw(decoupled.arena, {.lr = 0.1f, .weight_decay = 0.5f, .decoupled_weight_decay = true});
  EXPECT_EQ(adam.name(), "adam");
  EXPECT_EQ(adamw.name(), "adamw");
  for (int t = 0; t < 3; ++t) {
    l2.compute_grads();
    decoupled.compute_grads();
    adam.step();
    adamw.step();
  }
  EXPECT_NE(l2.params(), decoupled.params());
}

TEST(Adam, StepsResumeBiasCorrection) {
  // A restored optimizer continues the bias correction from the saved step count.
  Problem a, b;
  optim::Adam first(a.arena, {.lr = 0.01f});
  optim::Adam resumed(b.arena, {.lr = 0.01f});
  a.compute_grads();
  first.step();
  // Copy the state of `first` into `resumed` as a checkpoint restore would.
  kernels::copy(a.arena.flat_params(), b.arena.flat_params());
  auto from = first.state(), to = resumed.state();
  for (size_t s = 0; s < from.size(); ++s) kernels::copy(*from[s].second, *to[s].second);
  resumed.set_steps(first.steps());
  a.compute_grads();
  b.compute_grads();
  first.step();
  resumed.step();
  EXPECT_EQ(a.params(), b.params());
}


// Parameter groups: the formula of optimizer_math.h with the group's decay, bit for bit.
TEST(ParameterGroups, OnlyTensorsOfTwoOrMoreDimensionsDecay) {
  for (const bool decoupled : {false, true}) {
    Problem problem;
    const kernels::AdamHyper hyper{.lr = 0.1f, .weight_decay = 0.5f, .decoupled_weight_decay = decoupled};
    optim::Adam adam(problem.arena, hyper);
    const std::vector<float> before = problem.params();
    problem.compute_grads();
    const std::vector<float> grads = problem.arena.flat_grads().to_vector();
    adam.step();
    const std::vector<float> after = problem.params();
    kernels::AdamHyper no_decay = hyper;
    no_decay.weight_decay = 0.0f;
    for (size_t i = 0; i < before.size(); ++i) {
      float m = 0.0f, v = 0.0f;
      const auto step = kernels::adam_step(i < kDecayed ? hyper : no_decay, 1);
      EXPECT_EQ(after[i], kernels::adam_element_step(before[i], grads[i], m, v, step)) << "element " << i;
    }
  }
  Problem problem;
  optim::Sgd sgd(problem.arena, {.lr = 0.1f, .weight_decay = 0.5f});
  const std::vector<float> before = problem.params();
  problem.compute_grads();
  const std::vector<float> grads = problem.arena.flat_grads().to_vector();
  sgd.step();
  const std::vector<float> after = problem.params();
  for (size_t i = 0; i < before.size(); ++i)
    EXPECT_EQ(after[i], kernels::sgd_plain_step(before[i], grads[i], 0.1f, i < kDecayed ? 0.5f : 0.0f))
        << "element " << i;
}

TEST(ParameterGroups, RangesMergeNeighboursWithEqualDecay) {
  nn::ParameterArena arena;
  arena.declare("0.linear.weight", {2, 3}, 0);
  arena.declare("0.linear.bias", {2}, 0);
  arena.declare("1.norm.gain", {2}, 1);
  arena.declare("2.conv.weight", {1, 1, 2, 2}, 2);
  arena.allocate(Device::cpu());
  const auto ranges = optim::update_ranges(arena, 0.1f);
  ASSERT_EQ(ranges.size(), 3u);
  EXPECT_EQ(ranges[0].range, (optim::ArenaRange{0, 6}));
  EXPECT_EQ(ranges[0].weight_decay, 0.1f);
  EXPECT_EQ(ranges[1].range, (optim::ArenaRange{6, 10}));
  EXPECT_EQ(ranges[1].weight_decay, 0.0f);
  EXPECT_EQ(ranges[2].range, (optim::ArenaRange{10, 14}));
  const auto part = optim::intersect(ranges, {5, 11});
  ASSERT_EQ(part.size(), 3u);
  EXPECT_EQ(part[0].range, (optim::ArenaRange{5, 6}));
  EXPECT_EQ(part[2].range, (optim::ArenaRange{10, 11}));
}

// Shard by shard, the updates equal those over the whole arena, and the state is the
// whole state's slice.
TEST(Shards, ShardedUpdatesEqualTheWholeUpdate) {
  const kernels::AdamHyper hyper{.lr = 0.05f, .weight_decay = 0.2f, .decoupled_weight_decay = true};
  Problem whole;
  optim::Adam reference(whole.arena, hyper);
  for (int t = 0; t < kSteps; ++t) {
    whole.compute_grads();
    reference.step();
  }
  const int replicas = 3;
  std::vector<float> params(kStart.size());
  std::vector<float> m(kStart.size());
  for (int r = 0; r < replicas; ++r) {
    Problem problem;
    const auto shard = distribute::ShardPlan::make(problem.arena.numel(), replicas, true).shard(r);
    optim::Adam adam(problem.arena, hyper, shard);
    EXPECT_EQ(adam.state_bytes(), 2 * shard.numel() * 4);
    for (int t = 0; t < kSteps; ++t) {
      // Each element's gradient depends on that element alone, so the shard's elements
      // follow the whole run's trajectory without a gather.
      problem.compute_grads();
      adam.step();
    }
    const auto got = problem.params();
    const auto state = adam.state()[0].second->to_vector();
    for (int64_t i = shard.begin; i < shard.end; ++i) {
      params[static_cast<size_t>(i)] = got[static_cast<size_t>(i)];
      m[static_cast<size_t>(i)] = state[static_cast<size_t>(i - shard.begin)];
    }
  }
  EXPECT_EQ(params, whole.params());
  EXPECT_EQ(m, reference.state()[0].second->to_vector());
}

}  // namespace
}  // namespace mirrored
