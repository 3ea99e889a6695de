#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "error_matchers.h"
#include "mirrored/core/error.h"
#include "mirrored/data/sampler.h"

namespace mirrored::data {
namespace {

using mirrored::testing::expect_mentions;
using mirrored::testing::message_of;

TEST(EpochPermutation, IsAPermutation) {
  for (int64_t n : {0, 1, 2, 17, 1000}) {
    std::vector<int64_t> order = epoch_permutation(n, 42, 3);
    ASSERT_EQ(static_cast<int64_t>(order.size()), n);
    std::sort(order.begin(), order.end());
    std::vector<int64_t> identity(static_cast<size_t>(n));
    std::iota(identity.begin(), identity.end(), int64_t{0});
    EXPECT_EQ(order, identity) << "n = " << n;
  }
}

TEST(EpochPermutation, DependsOnlyOnSeedAndEpoch) {
  EXPECT_EQ(epoch_permutation(500, 7, 2), epoch_permutation(500, 7, 2));
  EXPECT_NE(epoch_permutation(500, 7, 2), epoch_permutation(500, 7, 3));
  EXPECT_NE(epoch_permutation(500, 7, 2), epoch_permutation(500, 8, 2));
}

TEST(ShardedSampler, ShuffleOffKeepsFileOrder) {
  ShardedSampler sampler(10, 4, 1, 2, 99, /*shuffle=*/false);
  sampler.set_epoch(5);
  const std::span<const int64_t> step1 = sampler.replica_indices(1);
  EXPECT_EQ(std::vector<int64_t>(step1.begin(), step1.end()), (std::vector<int64_t>{6, 7}));
}

TEST(ShardedSampler, DropsTheIncompleteLastBatch) {
  const ShardedSampler sampler(103, 20, 0, 4, 1);
  EXPECT_EQ(sampler.steps_per_epoch(), 5);
  EXPECT_EQ(sampler.per_replica_batch(), 5);
  EXPECT_EQ(sampler.global_batch(), 20);
}

// Every replica's slice of a step, concatenated in rank order, must be exactly the global
// batch a single process would draw: that is what makes a run's result independent of how
// many replicas share it. Across the epoch no sample may be seen twice.
TEST(ShardedSampler, ReplicaSlicesRebuildTheSingleProcessBatch) {
  constexpr int64_t kSize = 103;
  constexpr int64_t kGlobal = 20;
  constexpr uint64_t kSeed = 1234;
  for (int64_t epoch : {0, 1, 4}) {
    ShardedSampler single(kSize, kGlobal, 0, 1, kSeed);
    single.set_epoch(epoch);
    for (int world : {1, 2, 4}) {
      std::vector<ShardedSampler> replicas;
      for (int rank = 0; rank < world; ++rank) {
        replicas.emplace_back(kSize, kGlobal, rank, world, kSeed);
        replicas.back().set_epoch(epoch);
      }
      std::vector<int> seen(kSize, 0);
      int64_t visited = 0;
      for (int64_t step = 0; step < single.steps_per_epoch(); ++step) {
        std::vector<int64_t> joined;
        for (const ShardedSampler& replica : replicas) {
          ASSERT_EQ(replica.steps_per_epoch(), single.steps_per_epoch());
          const std::span<const int64_t> slice = replica.replica_indices(step);
          ASSERT_EQ(static_cast<int64_t>(slice.size()), kGlobal / world);
          joined.insert(joined.end(), slice.begin(), slice.end());
        }
        const std::span<const int64_t> global = single.replica_indices(step);
        EXPECT_EQ(joined, std::vector<int64_t>(global.begin(), global.end()))
            << "world " << world << ", epoch " << epoch << ", step " << step;
        for (int64_t index : joined) {
          ASSERT_TRUE(index >= 0 && index < kSize);
          ++seen[static_cast<size_t>(index)];
          ++visited;
        }
      }
      EXPECT_EQ(visited, single.steps_per_epoch() * kGlobal);
      EXPECT_LE(*std::max_element(seen.begin(), seen.end()), 1) << "world " << world;
    }
  }
}

TEST(ShardedSampler, EpochsDrawDifferentOrders) {
  ShardedSampler sampler(100, 10, 0, 1, 5);
  sampler.set_epoch(0);
  const std::span<const int64_t> first = sampler.replica_indices(0);
  const std::vector<int64_t> epoch0(first.begin(), first.end());
  sampler.set_epoch(1);
  const std::span<const int64_t> second = sampler.replica_indices(0);
  EXPECT_NE(epoch0, std::vector<int64_t>(second.begin(), second.end()));
}

TEST(ShardedSampler, BatchThatDoesNotDivideOverReplicas) {
  const std::string message = message_of<InputError>([] { ShardedSampler(1000, 130, 0, 4, 1); });
  EXPECT_EQ(message,
            "batch_size (global) 130 does not divide evenly over 4 replicas: choose a multiple of 4");
  try {
    ShardedSampler(1000, 130, 0, 4, 1);
  } catch (const InputError& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
  }
}

TEST(ShardedSampler, DatasetSmallerThanOneGlobalBatch) {
  expect_mentions(message_of<InputError>([] { ShardedSampler(50, 64, 0, 2, 1); }),
                  {"only 50 samples", "one global batch of 64"});
}

TEST(ShardedSampler, NonPositiveBatch) {
  expect_mentions(message_of<InputError>([] { ShardedSampler(50, 0, 0, 1, 1); }),
                  {"batch_size", "positive"});
}

TEST(EvalShard, CoversEverySampleExactlyOnceInWholeBatches) {
  for (int64_t n : {0, 1, 3, 7, 10, 10000, 10001}) {
    for (int64_t batch : {1, 3, 64}) {
      for (int world : {1, 2, 3, 4, 8}) {
        int64_t expected_begin = 0;
        int64_t smallest = n, largest = 0;
        for (int rank = 0; rank < world; ++rank) {
          const IndexRange range = eval_shard(n, batch, rank, world);
          EXPECT_EQ(range.begin, expected_begin) << "n " << n << " world " << world << " rank " << rank;
          EXPECT_GE(range.end, range.begin);
          // Every share starts at a batch boundary: the batches are the same at any world size.
          if (range.size() > 0) EXPECT_EQ(range.begin % batch, 0) << "n " << n << " batch " << batch << " rank " << rank;
          expected_begin = range.end;
          smallest = std::min(smallest, range.size());
          largest = std::max(largest, range.size());
        }
        EXPECT_EQ(expected_begin, n) << "n " << n << " world " << world;
        // One more batch on some ranks, and the set's partial last batch on the last one.
        EXPECT_LE(largest - smallest, 2 * batch) << "n " << n << " world " << world;
      }
    }
  }
}

TEST(EvalShard, FewerBatchesThanRanks) {
  // Three batches of 2 (the last one of 1) over four ranks: the first three take one each.
  EXPECT_EQ(eval_shard(5, 2, 0, 4).size(), 2);
  EXPECT_EQ(eval_shard(5, 2, 2, 4).begin, 4);
  EXPECT_EQ(eval_shard(5, 2, 2, 4).end, 5);
  EXPECT_EQ(eval_shard(5, 2, 3, 4).size(), 0);
}

TEST(BalancedShare, FirstRanksTakeTheRemainder) {
  EXPECT_EQ(balanced_share(10, 0, 4).size(), 3);
  EXPECT_EQ(balanced_share(10, 1, 4).begin, 3);
  EXPECT_EQ(balanced_share(10, 2, 4).begin, 6);
  EXPECT_EQ(balanced_share(10, 3, 4).begin, 8);
  EXPECT_EQ(balanced_share(10, 3, 4).end, 10);
}

TEST(ShardedSampler, UnevenSharesRebuildTheGlobalBatch) {
  // 12 samples per global batch over shares of 5, 4 and 3: together the single-process batch.
  const ShardedSampler single(100, 12, 0, 1, 7);
  const IndexRange shares[] = {{0, 5}, {5, 9}, {9, 12}};
  std::vector<int64_t> joined;
  for (const IndexRange& share : shares) {
    const ShardedSampler part(100, 12, share, 7);
    const auto indices = part.replica_indices(3);
    EXPECT_EQ(static_cast<int64_t>(indices.size()), share.size());
    joined.insert(joined.end(), indices.begin(), indices.end());
  }
  const auto whole = single.replica_indices(3);
  EXPECT_EQ(joined, std::vector<int64_t>(whole.begin(), whole.end()));
}

}  // namespace
}  // namespace mirrored::data
