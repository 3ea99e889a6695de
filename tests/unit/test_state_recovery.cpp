#include <gtest/gtest.h>

#include "mirrored/elastic/state_recovery.h"

namespace mirrored::elastic {
namespace {

TEST(ReplicatedHolder, TheMostStepsFromTheLowestRankHoldingThem) {
  // Rank 2 completed the interrupted step before the failure reached it.
  const ReplicatedHolder holder = choose_replicated_holder({10, 10, 11, -1}, {7, 7, 9, 0});
  EXPECT_EQ(holder.step, 11);
  EXPECT_EQ(holder.donor, 2);
  EXPECT_TRUE(holder.disagreeing.empty());
}

TEST(ReplicatedHolder, SurvivorsOfTheSameStepMustHoldTheSameBits) {
  // Every survivor completed step 11, each with a different sum (an all-reduce that
  // returned success with a partial sum): no state to trust.
  const ReplicatedHolder holder = choose_replicated_holder({11, 11, 11}, {5, 6, 5});
  EXPECT_EQ(holder.step, 11);
  EXPECT_EQ(holder.donor, 0);
  EXPECT_EQ(holder.disagreeing, std::vector<int>{1});
  // Ranks behind the newest step do not count.
  EXPECT_TRUE(choose_replicated_holder({10, 11, 11}, {1, 4, 4}).disagreeing.empty());
}

TEST(ReplicatedHolder, NoStateAnywhere) {
  const ReplicatedHolder holder = choose_replicated_holder({-1, -1}, {0, 0});
  EXPECT_EQ(holder.step, -1);
  EXPECT_EQ(holder.donor, -1);
  EXPECT_TRUE(holder.disagreeing.empty());
}

}  // namespace
}  // namespace mirrored::elastic
