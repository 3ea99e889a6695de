// The strategy contract across real MPI ranks: even split, chief-initialised mirrored
// variables, averaged gradients and data sharding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>

#include "mirrored/data/dataset.h"
#include "mirrored/distribute/strategy.h"
#include "mirrored/nn/builders.h"
#include "mirrored/nn/loss.h"
#include "mpi_env.h"

using namespace mirrored;

namespace {
std::shared_ptr<const data::Dataset> numbered_dataset(int64_t n) {
  auto ds = std::make_shared<data::Dataset>();
  ds->source = "numbered";
  ds->size = n;
  ds->sample_shape = {1, 1, 2};
  ds->num_classes = 10;
  for (int64_t i = 0; i < n; ++i) {
    // Pixel 0 encodes the sample index (mod 256) and pixel 1 its high byte.
    ds->images.push_back(static_cast<uint8_t>(i % 256));
    ds->images.push_back(static_cast<uint8_t>(i / 256));
    ds->labels.push_back(static_cast<uint8_t>(i % 10));
  }
  return ds;
}
int64_t decode_index(const float* pixels) {
  return static_cast<int64_t>(std::lround(pixels[0] * 255.0f)) + 256 * static_cast<int64_t>(std::lround(pixels[1] * 255.0f));
}
}  // namespace

TEST(Strategy, PerReplicaBatchSplitsEvenlyOrFailsClearly) {
  distribute::MirroredStrategy strategy(test_runtime());
  const int n = strategy.num_replicas_in_sync();
  EXPECT_EQ(strategy.per_replica_batch(8 * n), 8);
  try {
    strategy.per_replica_batch(4 * n + 1);
    FAIL() << "a global batch that does not divide must fail";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("does not divide evenly"), std::string::npos) << e.what();
  }
}

TEST(Strategy, ChiefInitialisesAndEveryReplicaStartsIdentical) {
  distribute::MirroredStrategy strategy(test_runtime());
  // Each rank passes a different seed: only the chief's may count.
  auto model = strategy.scope([] { return nn::mlp({{16}, 10}); },
                              {{1, 4, 4}, static_cast<uint64_t>(100 + strategy.replica_id())});
  auto reference = nn::mlp({{16}, 10});
  reference.build({1, 4, 4});
  reference.initialize(100);
  EXPECT_EQ(model.parameters().flat_params().to_vector(), reference.parameters().flat_params().to_vector());
  EXPECT_NO_THROW(strategy.check_replicas_in_sync(model));
}

TEST(Strategy, DriftedReplicaIsNamed) {
  distribute::MirroredStrategy strategy(test_runtime());
  auto model = strategy.scope([] { return nn::mlp({{8}, 10}); }, {{1, 2, 2}, 3});
  if (strategy.replica_id() == strategy.num_replicas_in_sync() - 1)
    model.parameters().flat_params().data<float>()[0] += 1.0f;
  try {
    strategy.check_replicas_in_sync(model);
    FAIL() << "a drifted replica must be detected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(strategy.num_replicas_in_sync() - 1)), std::string::npos);
  }
}

TEST(Strategy, GradientsAreAveragedOverReplicas) {
  distribute::MirroredStrategy strategy(test_runtime());
  distribute::ReducerOptions sequential;
  sequential.overlap = distribute::Overlap::kOff;  // all-reduce inside synchronize_gradients(), after the overwrite below
  auto model = strategy.scope([] { return nn::mlp({{4}, 3}); }, {{1, 1, 2}, 5, sequential});
  Tensor x({2, 1, 1, 2}), y({2}, DType::kI32);
  nn::CrossEntropyLoss loss;
  model.zero_grad();
  loss.forward(model.forward(x, nn::Mode::kTrain), y);
  model.backward(loss.grad());
  // Fill each replica's gradients with its rank: the mean is (n-1)/2 everywhere.
  auto& grads = model.parameters().flat_grads();
  std::fill_n(grads.data<float>(), grads.numel(), static_cast<float>(strategy.replica_id()));
  model.synchronize_gradients();
  const float expected = static_cast<float>(strategy.num_replicas_in_sync() - 1) / 2.0f;
  for (float g : grads.to_vector()) ASSERT_EQ(g, expected);
}

TEST(Strategy, ReduceSumAndMean) {
  distribute::MirroredStrategy strategy(test_runtime());
  const int n = strategy.num_replicas_in_sync();
  EXPECT_EQ(strategy.reduce(distribute::ReduceOp::kSum, static_cast<double>(strategy.replica_id() + 1)),
            n * (n + 1) / 2.0);
  EXPECT_FLOAT_EQ(strategy.reduce(distribute::ReduceOp::kMean, static_cast<float>(strategy.replica_id())),
                  static_cast<float>(n - 1) / 2.0f);
}

TEST(Sharding, EachTrainingSampleAtMostOncePerEpochAndReplicaSlicesFormTheGlobalBatch) {
  distribute::MirroredStrategy strategy(test_runtime());
  auto& world = strategy.communicator();
  const int n = world.size();
  const int64_t dataset_size = 1003, global_batch = 8 * n;
  auto dataset = strategy.distribute_dataset(numbered_dataset(dataset_size), {global_batch, 11, true});
  ASSERT_EQ(dataset.steps_per_epoch(), dataset_size / global_batch);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    std::vector<int64_t> mine;
    for (const auto& batch : dataset.epoch(epoch)) {
      ASSERT_EQ(batch.size(), global_batch / n);
      for (int64_t i = 0; i < batch.size(); ++i) mine.push_back(decode_index(batch.inputs.data<float>() + 2 * i));
    }
    std::vector<int64_t> all(mine.size() * static_cast<size_t>(n));
    world.allgather(mine.data(), all.data(), mine.size(), comm::DataType::kI64);
    const std::set<int64_t> distinct(all.begin(), all.end());
    EXPECT_EQ(distinct.size(), all.size()) << "a sample was seen twice in epoch " << epoch;
    EXPECT_EQ(static_cast<int64_t>(all.size()), dataset.steps_per_epoch() * global_batch);
  }
}

TEST(Sharding, EveryTestSampleExactlyOnce) {
  distribute::MirroredStrategy strategy(test_runtime());
  auto& world = strategy.communicator();
  for (int64_t size : {1, 7, 100, 1001}) {
    if (size < world.size()) continue;
    auto eval = strategy.distribute_eval_dataset(numbered_dataset(size), 16);
    std::vector<int64_t> counts(static_cast<size_t>(size), 0);
    for (int64_t b = 0; b < eval.num_batches(); ++b) {
      const auto& batch = eval.batch(b);
      for (int64_t i = 0; i < batch.size(); ++i) ++counts[static_cast<size_t>(decode_index(batch.inputs.data<float>() + 2 * i))];
    }
    world.allreduce(counts.data(), counts.size(), comm::ReduceOp::kSum);
    for (int64_t i = 0; i < size; ++i) ASSERT_EQ(counts[static_cast<size_t>(i)], 1) << "sample " << i << " of " << size;
  }
}
