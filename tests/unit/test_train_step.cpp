// The one training step (train/train_step.h): its phases, and gradient accumulation as the
// same update as one step over the combined batch.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "mirrored/distribute/runtime.h"
#include "mirrored/distribute/strategy.h"
#include "mirrored/nn/builders.h"
#include "mirrored/nn/loss.h"
#include "mirrored/optim/optimizer.h"
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
  train::StepResult step(std::vector<train::StepPhase>* phases = nullptr) {
    auto range = data.epoch(0);
    auto it = range.begin();
    bool started = false;
    train::StepHooks hooks;
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
  distribute::Runtime runtime_{argc_, argv_, {distribute::Launch::kLocal, distribute::DeviceChoice::kCpu}};
  distribute::MirroredStrategy strategy_{runtime_};
};

TEST_F(TrainStep, ReportsEveryPhaseOncePerMicroBatch) {
  Replica replica(strategy_, 4, 2);
  std::vector<train::StepPhase> phases;
  const auto result = replica.step(&phases);
  using P = train::StepPhase;
  EXPECT_EQ(phases, (std::vector<P>{P::kData, P::kForward, P::kBackward, P::kData, P::kForward, P::kBackward,
                                    P::kAllreduce, P::kOptimizer}));
  EXPECT_TRUE(result.updated);
  EXPECT_STREQ(train::step_phase_name(P::kAllreduce), "all-reduce");
}

TEST_F(TrainStep, TwoMicroBatchesUpdateLikeOneBatchOfBoth) {
  Replica accumulated(strategy_, 4, 2);  // samples 0-3, then 4-7, one update
  Replica whole(strategy_, 8, 1);        // samples 0-7 at once
  const std::vector<float> before = whole.model.parameters().flat_params().to_vector();
  ASSERT_EQ(accumulated.model.parameters().flat_params().to_vector(), before);  // same seed, same start
  const auto a = accumulated.step();
  const auto b = whole.step();
  EXPECT_NEAR(a.loss, b.loss, 1e-6f);
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

}  // namespace
}  // namespace mirrored
