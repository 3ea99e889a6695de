// The language-model sampling contract: window starts are a pure function of (seed, step,
// position), replicas' slices rebuild the single-process global batch at any world size,
// targets are the inputs shifted by one, and evaluation counts every window once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <vector>

#include "devices.h"
#include "error_matchers.h"
#include "mirrored/core/error.h"
#include "mirrored/core/rng.h"
#include "mirrored/data/token_dataset.h"
#include "mirrored/data/token_file.h"
#include "mirrored/data/token_sampler.h"
#include "mirrored/distribute/distributed_token_dataset.h"
#include "temp_dir.h"

namespace mirrored::data {
namespace {

using distribute::DistributedTokenDataset;
using distribute::TokenDatasetOptions;
using distribute::TokenEvalDataset;
using mirrored::testing::expect_mentions;
using mirrored::testing::message_of;
using mirrored::testing::TempDir;

std::vector<uint8_t> random_bytes(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint8_t> bytes(static_cast<size_t>(n));
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng.below(256));
  return bytes;
}

std::vector<int32_t> values(const Tensor& t) {
  const int32_t* p = t.data<int32_t>();
  return std::vector<int32_t>(p, p + t.numel());
}

TEST(WindowSampler, OffsetsArePureAndInRange) {
  for (int64_t step : {0, 1, 1000000}) {
    for (int64_t index : {0, 5, 63}) {
      const int64_t offset = window_offset(42, step, index, 1000);
      EXPECT_EQ(offset, window_offset(42, step, index, 1000));
      EXPECT_GE(offset, 0);
      EXPECT_LT(offset, 1000);
    }
  }
  // Drawing a slice gives what drawing one by one gives.
  const std::vector<int64_t> slice = window_offsets(7, 3, 8, 8, 999);
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(slice[static_cast<size_t>(i)], window_offset(7, 3, 8 + i, 999));
  EXPECT_NE(window_offsets(7, 3, 0, 16, 1 << 30), window_offsets(7, 4, 0, 16, 1 << 30));
  EXPECT_NE(window_offsets(7, 3, 0, 16, 1 << 30), window_offsets(8, 3, 0, 16, 1 << 30));
}

TEST(WindowSampler, EveryStartIsReachableAndUniform) {
  constexpr int64_t kStarts = 10;
  std::vector<int64_t> counts(kStarts, 0);
  constexpr int64_t kDraws = 100000;
  for (int64_t i = 0; i < kDraws; ++i) ++counts[static_cast<size_t>(window_offset(1, i / 64, i % 64, kStarts))];
  // Each of 10 starts expects 10000 hits; binomial sd is 95, so 500 is > 5 sd.
  for (int64_t c : counts) EXPECT_NEAR(static_cast<double>(c), 10000.0, 500.0);
}

TEST(WindowSampler, ContextLongerThanTheDataIsNamed) {
  EXPECT_EQ(window_starts(100, 99, "f.h5"), 1);
  const std::string message = message_of<InputError>([] { window_starts(100, 100, "f.h5"); });
  expect_mentions(message, {"'f.h5'", "context 100 is longer than the data", "/tokens holds 100 tokens",
                            "context + 1 = 101"});
  expect_mentions(message_of<InputError>([] { window_starts(100, 0, "f.h5"); }), {"context = 0"});
}

// 50000 random bytes in a token file, loaded: what the dataset tests share.
struct TokenData {
  void load() {
    bytes_ = random_bytes(50000, 21);
    path_ = dir_.file("t.h5");
    write_token_file(path_, bytes_, {});
    dataset_ = load_token_dataset(path_, 1);
  }
  TempDir dir_;
  std::vector<uint8_t> bytes_;
  std::string path_;
  std::shared_ptr<TokenDataset> dataset_;
};

class TokenDatasetTest : public ::testing::Test, protected TokenData {
 protected:
  void SetUp() override { load(); }
};

TEST_F(TokenDatasetTest, TargetsAreTheInputsShiftedByOne) {
  DistributedTokenDataset data(dataset_, {.global_batch = 8, .context = 64, .seed = 5}, even_share(8, 0, 1));
  for (int64_t step : {0, 1, 17}) {
    const distribute::Batch& batch = data.batch(step);
    ASSERT_EQ(batch.inputs.shape(), (Shape{8, 64}));
    ASSERT_EQ(batch.targets.shape(), (Shape{8, 64}));
    EXPECT_EQ(batch.inputs.dtype(), DType::kI32);
    EXPECT_EQ(batch.step, step);
    const std::vector<int64_t> offsets = data.replica_offsets(step);
    const std::vector<int32_t> inputs = values(batch.inputs), targets = values(batch.targets);
    for (int64_t row = 0; row < 8; ++row) {
      const int64_t offset = offsets[static_cast<size_t>(row)];
      ASSERT_LE(offset, 50000 - 65);
      for (int64_t t = 0; t < 64; ++t) {
        ASSERT_EQ(inputs[static_cast<size_t>(row * 64 + t)], bytes_[static_cast<size_t>(offset + t)]);
        ASSERT_EQ(targets[static_cast<size_t>(row * 64 + t)], bytes_[static_cast<size_t>(offset + t + 1)]);
      }
    }
  }
}

// Replica r's rows are rows [r*B, (r+1)*B) of the single-process global batch, for world
// sizes 1, 2 and 4, whatever the order in which steps are asked for.
TEST_F(TokenDatasetTest, WorldSizeDoesNotChangeTheGlobalBatch) {
  const TokenDatasetOptions options{.global_batch = 8, .context = 32, .seed = 77};
  DistributedTokenDataset single(dataset_, options, even_share(8, 0, 1));
  for (int world : {2, 4}) {
    std::vector<DistributedTokenDataset> replicas;
    for (int r = 0; r < world; ++r) replicas.emplace_back(dataset_, options, even_share(8, r, world));
    for (int64_t step : {0, 1, 2, 50, 3}) {
      const std::vector<int32_t> global_inputs = values(single.batch(step).inputs);
      const std::vector<int32_t> global_targets = values(single.batch(step).targets);
      std::vector<int32_t> joined_inputs, joined_targets;
      for (DistributedTokenDataset& replica : replicas) {
        const distribute::Batch& part = replica.batch(step);
        EXPECT_EQ(part.size(), 8 / world);
        const std::vector<int32_t> in = values(part.inputs), out = values(part.targets);
        joined_inputs.insert(joined_inputs.end(), in.begin(), in.end());
        joined_targets.insert(joined_targets.end(), out.begin(), out.end());
      }
      EXPECT_EQ(joined_inputs, global_inputs) << "world " << world << " step " << step;
      EXPECT_EQ(joined_targets, global_targets) << "world " << world << " step " << step;
    }
  }
}

TEST_F(TokenDatasetTest, BadOptionsAreUsageErrors) {
  const auto not_divisible = message_of<InputError>([&] { even_share(6, 0, 4); });
  expect_mentions(not_divisible, {"batch_size (global) 6", "does not divide evenly over 4 replicas"});
  const auto too_long = message_of<InputError>([&] { DistributedTokenDataset(dataset_, {.global_batch = 4, .context = 50000, .seed = 0}, {0, 4}); });
  expect_mentions(too_long, {"'" + path_ + "'", "context 50000 is longer than the data", "50000 tokens"});
  try {
    DistributedTokenDataset(dataset_, {.global_batch = 4, .context = 50000, .seed = 0}, {0, 4});
  } catch (const InputError& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
  }
}

// Evaluation windows tile the file without overlap; over any world size each is read by
// exactly one replica.
TEST_F(TokenDatasetTest, EvaluationCountsEveryWindowOnce) {
  constexpr int64_t kContext = 100;
  const int64_t windows = eval_window_count(50000, kContext, 0, path_);
  EXPECT_EQ(windows, 499);  // (50000 - 1) / 100
  EXPECT_EQ(eval_window_count(50000, kContext, 64, path_), 64);
  for (int world : {1, 3, 4}) {
    std::multiset<int32_t> first_tokens_seen;
    std::vector<int32_t> all_inputs;
    int64_t total = 0;
    for (int r = 0; r < world; ++r) {
      TokenEvalDataset eval(dataset_, 32, kContext, r, world);
      EXPECT_EQ(eval.num_windows(), windows);
      for (int64_t b = 0; b < eval.num_batches(); ++b) {
        const distribute::Batch& batch = eval.batch(b);
        const std::vector<int32_t> in = values(batch.inputs), out = values(batch.targets);
        all_inputs.insert(all_inputs.end(), in.begin(), in.end());
        total += batch.size();
        for (int64_t row = 0; row < batch.size(); ++row) {  // targets: inputs shifted by one
          for (int64_t t = 0; t + 1 < kContext; ++t) {
            ASSERT_EQ(out[static_cast<size_t>(row * kContext + t)], in[static_cast<size_t>(row * kContext + t + 1)]);
          }
        }
      }
    }
    EXPECT_EQ(total, windows) << "world " << world;
    // Replicas in rank order read windows 0, 1, 2, ... : the inputs are the file's first
    // windows * context bytes, in order, each once.
    ASSERT_EQ(all_inputs.size(), static_cast<size_t>(windows * kContext));
    EXPECT_TRUE(std::equal(all_inputs.begin(), all_inputs.end(), bytes_.begin())) << "world " << world;
  }
  TokenEvalDataset capped(dataset_, 10, kContext, 1, 2, Device::cpu(), 25);
  EXPECT_EQ(capped.num_windows(), 25);
  // Batches of 10, 10 and 5 windows: rank 1 of 2 takes the third, windows 20 to 24.
  EXPECT_EQ(capped.shard_size(), 5);
  EXPECT_EQ(capped.num_batches(), 1);
  EXPECT_EQ(values(capped.batch(0).inputs)[0], bytes_[20 * kContext]);
}

// The same data with a context for cuda:0 (the GPU batches are copied on its streams).
class TokenDatasetOnGpu : public mirrored::testing::CudaTest, protected TokenData {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (!IsSkipped()) load();
  }
};

// On a GPU the batch lives on the device and holds what the host batch holds.
TEST_F(TokenDatasetOnGpu, DeviceBatchesEqualHostBatches) {
  const TokenDatasetOptions options{.global_batch = 4, .context = 16, .seed = 9};
  DistributedTokenDataset host(dataset_, options, even_share(4, 1, 2));
  DistributedTokenDataset device(dataset_, options, even_share(4, 1, 2), Device::cuda(0));
  for (int64_t step : {0, 1, 2}) {
    const distribute::Batch& on_gpu = device.batch(step);
    ASSERT_TRUE(on_gpu.inputs.device().is_cuda());
    ASSERT_TRUE(on_gpu.targets.device().is_cuda());
    const std::vector<int32_t> inputs = values(mirrored::testing::to_device(on_gpu.inputs, Device::cpu()));
    const std::vector<int32_t> targets = values(mirrored::testing::to_device(on_gpu.targets, Device::cpu()));
    EXPECT_EQ(inputs, values(host.batch(step).inputs));
    EXPECT_EQ(targets, values(host.batch(step).targets));
  }
  TokenEvalDataset eval(dataset_, 8, 16, 0, 1, Device::cuda(0));
  EXPECT_TRUE(eval.batch(0).inputs.device().is_cuda());
}

}  // namespace
}  // namespace mirrored::data
