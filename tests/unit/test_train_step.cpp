// The one training step (train/train_step.h): its phases, and gradient accumulation as the
// same update as one step over the combined batch.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <memory>
#include <vector>

#include "mirrored/distribute/strategy.h"
#include "mirrored/nn/builders.h"
#include "mirrored/nn/loss.h"
#include "mirrored/optim/optimizer.h"
#include "mirrored/runtime/runtime.h"
#include "mirrored/train/non_finite_guard.h"
#include "mirrored/train/step_losses.h"
#include "mirrored/train/train_step.h"

namespace mirrored {
namespace {

std::shared_ptr<const data::Dataset> tiny_dataset() {
  auto dataset = std::make_shared<data::Dataset>();
  dataset->size = 8;
  dataset->sample_shape = {1, 4, 4};
  dataset->num_classes = 3;
  for (int64_t i = 0; i < dataset->size * 16; ++i) dataset->images.push_back(static_cast<uint8_t>((i * 37 + 11) % 256));
  for (int64_t i = 0; i < dataset->size; ++i) dataset->labels.push_back(static_cast<uint8_t>(i % 3));
  return dataset;
}

struct Replica {
  Replica(distribute::MirroredStrategy& strategy, int64_t global_batch, int accumulate_steps)
      : data(strategy.distribute_dataset(tiny_dataset(), {.global_batch = global_batch, .seed = 1, .shuffle = false})),
        model(strategy.scope([] { return nn::mlp({{5}, 3}); }, {{1, 4, 4}, 3, {}, accumulate_steps})),
        optimizer(model.parameters(), {.lr = 0.1f, .momentum = 0.0f}) {}

  // One step over the epoch's batches in order; records the phases it reports.
  train::StepResult step(std::vector<train::StepPhase>* phases = nullptr, train::StepHooks hooks = {}) {
    auto range = data.epoch(0);
    auto it = range.begin();
    bool started = false;
    if (phases) hooks.phase_done = [phases](train::StepPhase phase) { phases->push_back(phase); };
    return train::train_step(
        model, optimizer, loss_fn,
        [&]() -> const distribute::Batch& {
          if (started) ++it;
          started = true;
          return *it;
        },
        0, hooks);
  }

  distribute::DistributedDataset data;
  distribute::DistributedModel model;
  optim::Sgd optimizer;
  nn::CrossEntropyLoss loss_fn;
};

class TrainStep : public ::testing::Test {
 protected:
  int argc_ = 0;
  char** argv_ = nullptr;
  runtime::Runtime runtime_{argc_, argv_, {runtime::Launch::kLocal, runtime::DeviceChoice::kCpu}};
  distribute::MirroredStrategy strategy_{runtime_};
};

TEST_F(TrainStep, ReportsEveryPhaseOncePerMicroBatch) {
  Replica replica(strategy_, 4, 2);
  std::vector<train::StepPhase> phases;
  const auto result = replica.step(&phases);
  using P = train::StepPhase;
  EXPECT_EQ(phases, (std::vector<P>{P::kData, P::kForward, P::kBackward, P::kData, P::kForward, P::kBackward,
                                    P::kAllreduce, P::kOptimizer}));
  EXPECT_EQ(result.losses.numel(), 2);  // one loss per micro-batch, left on the model's device
  EXPECT_STREQ(train::step_phase_name(P::kAllreduce), "all-reduce");
}

TEST_F(TrainStep, TwoMicroBatchesUpdateLikeOneBatchOfBoth) {
  Replica accumulated(strategy_, 4, 2);  // samples 0-3, then 4-7, one update
  Replica whole(strategy_, 8, 1);        // samples 0-7 at once
  const std::vector<float> before = whole.model.parameters().flat_params().to_vector();
  ASSERT_EQ(accumulated.model.parameters().flat_params().to_vector(), before);  // same seed, same start
  const auto a = accumulated.step();
  const auto b = whole.step();
  EXPECT_NEAR(train::step_loss(a.losses), train::step_loss(b.losses), 1e-6f);
  const auto pa = accumulated.model.parameters().flat_params().to_vector();
  const auto pb = whole.model.parameters().flat_params().to_vector();
  ASSERT_EQ(pa.size(), pb.size());
  double moved = 0.0;
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_NEAR(pa[i], pb[i], 1e-6f) << "parameter " << i;
    moved += std::abs(pb[i] - before[i]);
  }
  EXPECT_GT(moved, 1e-3) << "the step must change the parameters";
}

TEST_F(TrainStep, LossesGoWhereTheCallerKeepsThem) {
  Replica replica(strategy_, 4, 2);
  train::StepLosses losses(Device::cpu(), 2, 3);
  train::StepHooks hooks;
  hooks.losses = losses.slots(1);
  const auto result = replica.step(nullptr, hooks);
  EXPECT_EQ(losses.loss(1), train::step_loss(result.losses));
  EXPECT_GT(losses.loss(1), 0.0f);
  EXPECT_EQ(losses.sum(1, 2), static_cast<double>(losses.loss(1)));
}

TEST(StepLosses, StepLossIsTheFloatMeanOfItsMicroBatchesAndSumsAreDoubles) {
  train::StepLosses losses(Device::cpu(), 3, 4);
  const std::vector<std::vector<float>> steps = {{0.1f, 0.2f, 0.7f}, {1.0f, 1e-8f, 2.0f}};
  for (size_t i = 0; i < steps.size(); ++i) {
    Tensor slots = losses.slots(static_cast<int64_t>(i));
    for (int m = 0; m < 3; ++m) slots.data<float>()[m] = steps[i][m];
  }
  const float first = (0.1f + 0.2f + 0.7f) / 3.0f, second = (1.0f + 1e-8f + 2.0f) / 3.0f;
  EXPECT_EQ(losses.loss(0), first);
  EXPECT_EQ(losses.sum(0, 2), static_cast<double>(first) + static_cast<double>(second));
  EXPECT_EQ(losses.sum(1, 2), static_cast<double>(second));
  losses.restart();  // a new epoch writes from index 0 again
  losses.slots(0).data<float>()[0] = 3.0f;
  losses.slots(0).data<float>()[1] = 3.0f;
  losses.slots(0).data<float>()[2] = 3.0f;
  EXPECT_EQ(losses.loss(0), 3.0f);
  EXPECT_THROW(losses.slots(4), Error);
}

std::vector<float> minus(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> d(a.size());
  for (size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
  return d;
}

double norm(const std::vector<float>& v) {
  double sum = 0.0;
  for (float x : v) sum += static_cast<double>(x) * x;
  return std::sqrt(sum);
}

// Plain SGD moves the parameters by -lr * g: with clipping, g becomes g * max_norm / (|g| +
// 1e-6) (torch.nn.utils.clip_grad_norm_), so the step is lr * max_norm long and points the
// same way; a max_norm above |g| changes nothing.
TEST_F(TrainStep, ClippingScalesTheUpdateToMaxNorm) {
  Replica plain(strategy_, 8, 1), clipped(strategy_, 8, 1), loose(strategy_, 8, 1);
  const auto before = plain.model.parameters().flat_params().to_vector();
  plain.step();
  train::StepHooks hooks;
  hooks.grad_clip = 1e6f;  // factor 1: exactly the unclipped update
  loose.step(nullptr, hooks);
  EXPECT_EQ(loose.model.parameters().flat_params().to_vector(), plain.model.parameters().flat_params().to_vector());
  const double gradient_norm = loose.model.gradient_norm().to_vector()[0];
  const auto g = minus(before, plain.model.parameters().flat_params().to_vector());  // lr * gradient, rounded
  EXPECT_NEAR(norm(g), 0.1 * gradient_norm, 1e-3 * 0.1 * gradient_norm) << "the norm of the averaged gradient";
  ASSERT_GT(gradient_norm, 0.05) << "the case must clip at max_norm 0.01";
  hooks.grad_clip = 0.01f;
  clipped.step(nullptr, hooks);
  EXPECT_EQ(clipped.model.gradient_norm().to_vector()[0], gradient_norm) << "the norm before clipping";
  const auto c = minus(before, clipped.model.parameters().flat_params().to_vector());
  EXPECT_NEAR(norm(c), 0.1 * 0.01, 2e-6);  // parameters ~0.5 round at ~6e-8 each
  const double factor = 0.01 / (gradient_norm + 1e-6);
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(c[i], g[i] * factor, 2e-7) << "parameter " << i;
}

// The guard's device path, settled late as on a GPU (the CPU settles every step, which
// train_step does by itself): flag() after each step's gradients, settle() afterwards.
class Guard : public TrainStep {
 protected:
  void set_gradients(float value) {
    Tensor& grads = replica_.model.parameters().flat_grads();
    float* g = grads.data<float>();
    for (int64_t i = 0; i < grads.numel(); ++i) g[i] = i == 0 ? value : 0.01f;
  }
  void step(train::NonFiniteGuard& guard, float first_gradient, int64_t step) {
    set_gradients(first_gradient);
    guard.flag(replica_.model, replica_.optimizer, step);
    replica_.optimizer.step();
  }
  std::vector<float> params() { return replica_.model.parameters().flat_params().to_vector(); }

  Replica replica_{strategy_, 8, 1};
  config::TrainConfig config_;
  const float nan_ = std::numeric_limits<float>::quiet_NaN();
};

TEST_F(Guard, SkipLeavesFlaggedUpdatesOutAndCorrectsTheStepCount) {
  config_.nan_policy = config::NanPolicy::kSkip;
  train::NonFiniteGuard guard(config_, true);
  step(guard, 1.0f, 1);
  const auto after_one = params();
  step(guard, nan_, 2);
  EXPECT_EQ(params(), after_one) << "a flagged update must not apply";
  step(guard, 1.0f, 3);
  EXPECT_NE(params(), after_one);
  EXPECT_EQ(replica_.optimizer.steps(), 3) << "step() counts until the guard settles";
  guard.settle(replica_.optimizer, nullptr);
  EXPECT_EQ(guard.skipped(), 1);
  EXPECT_EQ(replica_.optimizer.steps(), 2);
  guard.settle(replica_.optimizer, nullptr);  // nothing new
  EXPECT_EQ(guard.skipped(), 1);
  EXPECT_EQ(replica_.optimizer.steps(), 2);
}

TEST_F(Guard, StopLatchesAndNamesTheFirstBadStep) {
  config_.nan_policy = config::NanPolicy::kStop;
  config_.out = "/nonexistent/run";
  train::NonFiniteGuard guard(config_, true);
  step(guard, 1.0f, 1);
  const auto good = params();
  step(guard, nan_, 2);
  step(guard, 1.0f, 3);  // finite again, but a stop must not apply anything after the bad step
  EXPECT_EQ(params(), good);
  try {
    guard.settle(replica_.optimizer, [](int64_t step) -> std::optional<float> { return 10.0f * step; });
    FAIL() << "nan_policy = stop must throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kNonFinite);
    EXPECT_NE(std::string(e.what()).find("step 2: the averaged gradients hold NaN/Inf (this replica's loss 20)"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(TrainStep, GuardOnTheCpuDecidesWithinTheStep) {
  config::TrainConfig config;
  config.nan_policy = config::NanPolicy::kStop;
  config.out = "/nonexistent/run";
  train::NonFiniteGuard guard(config, true);
  Replica replica(strategy_, 8, 1);
  replica.model.parameters().flat_params().data<float>()[0] = std::numeric_limits<float>::infinity();
  train::StepHooks hooks;
  hooks.guard = &guard;
  EXPECT_THROW(replica.step(nullptr, hooks), Error);
}

}  // namespace
}  // namespace mirrored
