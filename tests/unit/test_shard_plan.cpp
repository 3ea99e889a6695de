// The shard plan as a pure function of (arena size, world size): the plans every rank of a
// world computes, a resume at another world size computes, and a shrinking run will compute.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "mirrored/comm/local_communicator.h"
#include "mirrored/distribute/shard_plan.h"

namespace mirrored {
namespace {

using distribute::ShardPlan;

TEST(ShardPlan, ShardsPartitionTheArenaInRankOrder) {
  for (const int64_t numel : {0, 1, 7, 1000, 1001, 123457}) {
    for (const int replicas : {2, 3, 4, 6, 7}) {
      const ShardPlan plan = ShardPlan::make(numel, replicas, true);
      ASSERT_TRUE(plan.sharded());
      ASSERT_EQ(plan.counts().size(), static_cast<size_t>(replicas));
      const std::vector<int64_t> bounds = plan.bounds();
      ASSERT_EQ(bounds.size(), static_cast<size_t>(replicas) + 1);
      EXPECT_EQ(bounds.front(), 0);
      EXPECT_EQ(bounds.back(), numel);
      size_t fewest = plan.counts().front(), most = fewest;
      for (int r = 0; r < replicas; ++r) {
        const auto shard = plan.shard(r);
        EXPECT_EQ(shard.begin, bounds[static_cast<size_t>(r)]) << numel << " over " << replicas << ", rank " << r;
        EXPECT_EQ(shard.end, bounds[static_cast<size_t>(r) + 1]);
        EXPECT_EQ(static_cast<size_t>(shard.numel()), plan.counts()[static_cast<size_t>(r)]);
        fewest = std::min(fewest, plan.counts()[static_cast<size_t>(r)]);
        most = std::max(most, plan.counts()[static_cast<size_t>(r)]);
      }
      EXPECT_LE(most - fewest, 1u) << "balanced: " << numel << " over " << replicas;
    }
  }
}

TEST(ShardPlan, ReplanDependsOnlyOnArenaAndWorldSize) {
  const ShardPlan four = ShardPlan::make(1001, 4, true);
  const ShardPlan three = four.replan(3);
  EXPECT_EQ(three.replicas(), 3);
  EXPECT_EQ(three.counts(), ShardPlan::make(1001, 3, true).counts());
  EXPECT_EQ(three.bounds(), (std::vector<int64_t>{0, 333, 667, 1001}));
  // Back to the first world size: the same plan as before, whatever happened in between.
  EXPECT_EQ(three.replan(4).bounds(), four.bounds());
  // A world of one is never sharded, and an unsharded plan stays unsharded at any size.
  EXPECT_FALSE(four.replan(1).sharded());
  EXPECT_EQ(four.replan(1).shard(0), (optim::ArenaRange{0, 1001}));
  const ShardPlan replicated = ShardPlan::make(1001, 4, false);
  EXPECT_FALSE(replicated.replan(3).sharded());
  for (int r = 0; r < 3; ++r) EXPECT_EQ(replicated.replan(3).shard(r), (optim::ArenaRange{0, 1001}));
}

TEST(ShardPlan, CollectivesOfAWorldOfOneKeepTheValues) {
  comm::LocalCommunicator local;
  const ShardPlan plan = ShardPlan::make(5, 1, true);
  std::vector<float> logical = {1, 2, 3, 4, 5};
  Tensor state({5}, DType::kF32);
  plan.scatter_from_chief(logical, state, local);
  EXPECT_EQ(state.to_vector(), logical);
  EXPECT_EQ(plan.gather_to_chief(state, local), logical);
  Tensor flag = Tensor::from(std::vector<float>{0.5f}, {1});
  plan.sum_over_shards(flag, local);
  EXPECT_EQ(flag.to_vector()[0], 0.5f);
}

TEST(ShardPlan, RefusesAWorldItWasNotMadeFor) {
  comm::LocalCommunicator local;
  const ShardPlan plan = ShardPlan::make(10, 2, true);
  Tensor state({5}, DType::kF32);
  EXPECT_THROW(plan.gather_to_chief(state, local), Error);
}

}  // namespace
}  // namespace mirrored
