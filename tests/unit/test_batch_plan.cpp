// The batch plan: which samples and virtual replicas each rank computes.
#include <gtest/gtest.h>

#include "error_matchers.h"
#include "mirrored/core/error.h"
#include "mirrored/distribute/batch_plan.h"

namespace mirrored::distribute {
namespace {

using mirrored::testing::expect_mentions;
using mirrored::testing::message_of;

TEST(BatchPlan, FastIsOneEvenShareperReplica) {
  const BatchPlan plan = BatchPlan::make(64, 4, {});
  EXPECT_EQ(plan.groups(), 4);
  EXPECT_EQ(plan.samples_of(2).begin, 32);
  EXPECT_EQ(plan.samples_of(2).end, 48);
  expect_mentions(message_of<InputError>([] { BatchPlan::make(64, 3, {}); }),
                  {"batch_size (global) 64", "does not divide evenly over 3 replicas"});
}

TEST(BatchPlan, InvariantSpreadsVirtualReplicasUnevenly) {
  const BatchPlan plan = BatchPlan::make(12, 4, {Reduction::kInvariant, 6});
  EXPECT_EQ(plan.group_size(), 2);
  // 6 over 4 ranks: 2, 2, 1, 1, contiguous, covering the batch once.
  const int64_t expected_groups[][2] = {{0, 2}, {2, 4}, {4, 5}, {5, 6}};
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(plan.groups_of(r).begin, expected_groups[r][0]) << "rank " << r;
    EXPECT_EQ(plan.groups_of(r).end, expected_groups[r][1]) << "rank " << r;
    EXPECT_EQ(plan.samples_of(r).begin, 2 * expected_groups[r][0]) << "rank " << r;
  }
  EXPECT_EQ(plan.describe(), "6 virtual replica(s) of 2 sample(s), 1 or 2 per rank");
  // Re-planned for a smaller world: the same groups of the same size.
  const BatchPlan three = plan.replan(3);
  EXPECT_EQ(three.groups(), 6);
  EXPECT_EQ(three.groups_of(2).begin, 4);
}

TEST(BatchPlan, DefaultVirtualReplicas) {
  EXPECT_EQ(default_virtual_replicas(12, 1), 6);
  EXPECT_EQ(default_virtual_replicas(64, 4), 8);
  EXPECT_EQ(default_virtual_replicas(7, 2), 7);   // prime: one sample each
  EXPECT_EQ(default_virtual_replicas(96, 12), 12);
  EXPECT_EQ(BatchPlan::make(64, 2, {Reduction::kInvariant, 0}).groups(), 8);
}

TEST(BatchPlan, InvariantRefusalsNameTheKey) {
  expect_mentions(message_of<InputError>([] { BatchPlan::make(64, 1, {Reduction::kInvariant, 5}); }),
                  {"reduction.shards = 5", "does not divide batch_size (global) 64"});
  expect_mentions(message_of<InputError>([] { BatchPlan::make(64, 3, {Reduction::kInvariant, 2}); }),
                  {"2 virtual replicas (reduction.shards)", "cannot run on 3 ranks"});
}

TEST(BatchPlan, FastReplanOnAWorldThatDoesNotDivideGivesSharesOneSampleApart) {
  const BatchPlan plan = BatchPlan::make(128, 4, {}).replan(3);
  EXPECT_EQ(plan.samples_of(0).size(), 43);
  EXPECT_EQ(plan.samples_of(2).size(), 42);
  EXPECT_EQ(plan.samples_of(2).end, 128);
}

// A shrunk world's plan (uneven_shares): the same shares as a re-plan, and weights that make
// the mean over replicas of weighted share means the mean over the global batch.
TEST(BatchPlan, FastUnevenSharesWeighEachReplicaBySize) {
  const BatchPlan plan = BatchPlan::make(128, 3, {Reduction::kFast, 0, /*uneven_shares=*/true});
  EXPECT_EQ(plan.samples_of(0).size(), 43);
  EXPECT_EQ(plan.samples_of(2).size(), 42);
  double weights = 0.0;
  for (int r = 0; r < 3; ++r) {
    EXPECT_FLOAT_EQ(plan.share_weight(r), 3.0f * static_cast<float>(plan.samples_of(r).size()) / 128.0f);
    weights += plan.share_weight(r);
  }
  EXPECT_NEAR(weights / 3.0, 1.0, 1e-7) << "a mean of weights that is 1: a constant loss stays itself";
  // Even shares weigh exactly 1, so the bits of an even split do not change.
  const BatchPlan even = BatchPlan::make(128, 4, {Reduction::kFast, 0, true});
  for (int r = 0; r < 4; ++r) EXPECT_EQ(even.share_weight(r), 1.0f);
  EXPECT_EQ(BatchPlan::make(12, 4, {Reduction::kInvariant, 6}).share_weight(3), 1.0f);
  expect_mentions(message_of<InputError>([] { BatchPlan::make(2, 3, {Reduction::kFast, 0, true}); }),
                  {"batch_size = 2", "smaller than the 3 replicas"});
}

}  // namespace
}  // namespace mirrored::distribute
