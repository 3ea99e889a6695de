// The owner of membership's pure decisions (elastic/membership.h): who a shrink lost, and
// which survivor ends a lost rank that may only be stopped. Every survivor computes them
// from the same facts, so they must not depend on which survivor asks.
#include <gtest/gtest.h>

#include "mirrored/elastic/membership.h"

namespace mirrored::elastic {
namespace {

// Ranks 0-1 on host a, 2-3 on host b, as mpirun fills hosts.
std::vector<runtime::JobMember> two_hosts() {
  return {{100, "a", 0}, {101, "a", 1}, {200, "b", 2}, {201, "b", 3}};
}

runtime::ShrunkJob shrunk_to(std::vector<int> previous, int rank, int size_before = 4) {
  runtime::ShrunkJob shrunk;
  shrunk.size_before = size_before;
  shrunk.rank = rank;
  shrunk.previous_rank = std::move(previous);
  return shrunk;
}

TEST(Membership, TheLostAreTheRanksNoSurvivorWas) {
  const Membership m = membership_after(two_hosts(), shrunk_to({0, 1, 3}, 0));
  EXPECT_EQ(m.world_size, 3);
  ASSERT_EQ(m.lost.size(), 1u);
  EXPECT_EQ(m.lost[0].rank, 2);
  EXPECT_EQ(m.lost[0].host, "b");
  EXPECT_EQ(describe_lost(m), "rank 2 (b)");

  const Membership host_b = membership_after(two_hosts(), shrunk_to({0, 1}, 1));
  EXPECT_EQ(host_b.world_size, 2);
  EXPECT_EQ(describe_lost(host_b), "rank 2 (b), rank 3 (b)");
}

TEST(Membership, NobodyLostWhenEveryRankSurvived) {
  const Membership m = membership_after(two_hosts(), shrunk_to({0, 1, 2, 3}, 2));
  EXPECT_EQ(m.world_size, 4);
  EXPECT_TRUE(m.lost.empty());
  EXPECT_EQ(describe_lost(m), "no rank");
}

TEST(Membership, TheLowestSurvivorOnALostRanksHostEndsIt) {
  // Rank 2 lost: rank 3 (now rank 2) is the only survivor on b.
  const auto before = two_hosts();
  const Membership m = membership_after(before, shrunk_to({0, 1, 3}, 0));
  for (int rank = 0; rank < 3; ++rank) {
    const auto ends = lost_ranks_to_end(before, shrunk_to({0, 1, 3}, rank), m);
    EXPECT_EQ(ends, rank == 2 ? std::vector<int>{2} : std::vector<int>{}) << "survivor " << rank;
  }
  // Rank 0 lost: rank 1 (now rank 0) is the lowest survivor on a, and the chief.
  const Membership chief_lost = membership_after(before, shrunk_to({1, 2, 3}, 0));
  EXPECT_EQ(lost_ranks_to_end(before, shrunk_to({1, 2, 3}, 0), chief_lost), std::vector<int>{0});
  EXPECT_TRUE(lost_ranks_to_end(before, shrunk_to({1, 2, 3}, 1), chief_lost).empty());
}

TEST(Membership, NoSurvivorEndsTheRanksOfAHostWithNoneLeft) {
  const auto before = two_hosts();
  const Membership m = membership_after(before, shrunk_to({0, 1}, 0));
  for (int rank = 0; rank < 2; ++rank) EXPECT_TRUE(lost_ranks_to_end(before, shrunk_to({0, 1}, rank), m).empty());
}

TEST(Membership, ASecondShrinkNumbersRanksByTheJobBeforeIt) {
  // After losing rank 2 the job is {a, a, b} as ranks 0-2; losing rank 1 of that job now.
  const std::vector<runtime::JobMember> before = {{100, "a", 0}, {101, "a", 1}, {201, "b", 3}};
  const Membership m = membership_after(before, shrunk_to({0, 2}, 0, 3));
  ASSERT_EQ(m.lost.size(), 1u);
  EXPECT_EQ(m.lost[0].rank, 1);
  EXPECT_EQ(m.lost[0].host, "a");
  EXPECT_EQ(lost_ranks_to_end(before, shrunk_to({0, 2}, 0, 3), m), std::vector<int>{1});
}

}  // namespace
}  // namespace mirrored::elastic
