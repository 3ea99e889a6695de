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

// Hot spares: ranks 0-3 train on hosts a and b, host c holds spares 4 and 5.
std::vector<runtime::JobMember> two_hosts_and_a_spare_host() {
  return {{100, "a", 0}, {101, "a", 1}, {200, "b", 2}, {201, "b", 3}, {300, "c", 4}, {301, "c", 5}};
}
const std::vector<int> kFourTrain = {0, 1, 2, 3};

TEST(Succession, TheLowestSpareTakesALostRanksPlace) {
  // Rank 1 lost: survivors 0, 2, 3, 4, 5 are job ranks 0-4 of the shrunk job.
  const Membership m = membership_after(two_hosts_and_a_spare_host(), kFourTrain, shrunk_to({0, 2, 3, 4, 5}, 0, 6));
  EXPECT_EQ(m.world_size, 4);
  EXPECT_EQ(m.world, (std::vector<int>{0, 3, 1, 2}));  // spare 4 (now job rank 3) at world rank 1
  ASSERT_EQ(m.replaced.size(), 1u);
  EXPECT_EQ(m.replaced[0].rank, 1);
  EXPECT_EQ(m.replaced[0].host, "a");
  EXPECT_EQ(m.replaced[0].by_host, "c");
  EXPECT_EQ(m.replaced[0].by_job_rank, 4);
  EXPECT_TRUE(m.lost.empty());
  EXPECT_TRUE(m.lost_spares.empty());
  EXPECT_EQ(m.spares_left, 1);
  EXPECT_EQ(describe_change(m), "rank 1 (a) replaced by a spare on c");
}

TEST(Succession, TheChiefsPlaceGoesToASpareToo) {
  const Membership m = membership_after(two_hosts_and_a_spare_host(), kFourTrain, shrunk_to({1, 2, 3, 4, 5}, 0, 6));
  EXPECT_EQ(m.world, (std::vector<int>{3, 0, 1, 2}));
  ASSERT_EQ(m.replaced.size(), 1u);
  EXPECT_EQ(m.replaced[0].rank, 0);
}

TEST(Succession, ASpareNodeTakesALostNodesPlacesInOrder) {
  // Host b (ranks 2, 3) lost: spares 4 and 5 (local ranks 0 and 1 on c) take world ranks 2
  // and 3, in that order.
  const Membership m = membership_after(two_hosts_and_a_spare_host(), kFourTrain, shrunk_to({0, 1, 4, 5}, 0, 6));
  EXPECT_EQ(m.world, (std::vector<int>{0, 1, 2, 3}));
  ASSERT_EQ(m.replaced.size(), 2u);
  EXPECT_EQ(m.replaced[0].rank, 2);
  EXPECT_EQ(m.replaced[0].by_job_rank, 4);
  EXPECT_EQ(m.replaced[1].rank, 3);
  EXPECT_EQ(m.replaced[1].by_job_rank, 5);
  EXPECT_EQ(m.spares_left, 0);
}

TEST(Succession, MoreLossesThanSparesReplaceWhatTheyCanThenShrink) {
  // Ranks 1 and 3 lost with one spare (job rank 4) left: rank 1 replaced, rank 3 lost.
  const std::vector<runtime::JobMember> before = {{100, "a", 0}, {101, "a", 1}, {200, "b", 2}, {201, "b", 3},
                                                   {300, "c", 4}};
  const Membership m = membership_after(before, kFourTrain, shrunk_to({0, 2, 4}, 0, 5));
  EXPECT_EQ(m.world_size, 3);
  EXPECT_EQ(m.world, (std::vector<int>{0, 2, 1}));
  ASSERT_EQ(m.replaced.size(), 1u);
  EXPECT_EQ(m.replaced[0].rank, 1);
  ASSERT_EQ(m.lost.size(), 1u);
  EXPECT_EQ(m.lost[0].rank, 3);
  EXPECT_EQ(m.lost[0].job_rank, 3);
  EXPECT_EQ(describe_change(m), "rank 1 (a) replaced by a spare on c, rank 3 (b)");
}

TEST(Succession, ALostSpareIsOnlyRecorded) {
  const Membership m = membership_after(two_hosts_and_a_spare_host(), kFourTrain, shrunk_to({0, 1, 2, 3, 5}, 0, 6));
  EXPECT_EQ(m.world, kFourTrain);
  EXPECT_TRUE(m.replaced.empty());
  EXPECT_TRUE(m.lost.empty());
  ASSERT_EQ(m.lost_spares.size(), 1u);
  EXPECT_EQ(m.lost_spares[0].rank, 4);
  EXPECT_EQ(m.lost_spares[0].host, "c");
  EXPECT_EQ(m.spares_left, 1);
  EXPECT_TRUE(m.lost_any());
}

TEST(Succession, AWorldInAnotherOrderKeepsItsOrder) {
  // After a replacement the world is job ranks {0, 3, 1, 2} (spare at world rank 1) with
  // spare 4 left; world rank 2 (job rank 1) lost now goes to that spare.
  const std::vector<runtime::JobMember> before = {{100, "a", 0}, {200, "b", 2}, {201, "b", 3}, {300, "c", 4},
                                                   {301, "c", 5}};
  const Membership m = membership_after(before, {0, 3, 1, 2}, shrunk_to({0, 2, 3, 4}, 0, 5));
  EXPECT_EQ(m.world, (std::vector<int>{0, 2, 3, 1}));
  ASSERT_EQ(m.replaced.size(), 1u);
  EXPECT_EQ(m.replaced[0].rank, 2);
  EXPECT_EQ(m.replaced[0].host, "b");
  EXPECT_EQ(m.replaced[0].by_job_rank, 4);
}

TEST(Succession, TheLowestSurvivorOnAHostEndsAReplacedRankThatIsOnlyStopped) {
  // Rank 1 (on a) stopped and replaced: rank 0, the only survivor on a, ends it.
  const auto before = two_hosts_and_a_spare_host();
  const Membership m = membership_after(before, kFourTrain, shrunk_to({0, 2, 3, 4, 5}, 0, 6));
  EXPECT_EQ(lost_ranks_to_end(before, shrunk_to({0, 2, 3, 4, 5}, 0, 6), m), std::vector<int>{1});
  EXPECT_TRUE(lost_ranks_to_end(before, shrunk_to({0, 2, 3, 4, 5}, 3, 6), m).empty());
}

TEST(Succession, ALossDuringTheRecoveryIsDecidedFromTheMembershipItBeganWith) {
  // Spare 4 lost; before the world was rebuilt, rank 2 lost too. The job after both shrinks
  // is first-world ranks {0, 1, 3, 5}; seen as one shrink of the settled job, spare 5 takes
  // world rank 2 and spare 4 is recorded as lost.
  const auto before = two_hosts_and_a_spare_host();
  const std::vector<runtime::JobMember> after = {{100, "a", 0}, {101, "a", 1}, {201, "b", 3}, {301, "c", 5}};
  const runtime::ShrunkJob shrunk = shrink_of(before, after, 3);
  EXPECT_EQ(shrunk.previous_rank, (std::vector<int>{0, 1, 3, 5}));
  EXPECT_EQ(shrunk.rank, 3);
  const Membership m = membership_after(before, kFourTrain, shrunk);
  EXPECT_EQ(m.world, (std::vector<int>{0, 1, 3, 2}));
  ASSERT_EQ(m.replaced.size(), 1u);
  EXPECT_EQ(m.replaced[0].rank, 2);
  EXPECT_EQ(m.replaced[0].by_job_rank, 5);
  ASSERT_EQ(m.lost_spares.size(), 1u);
  EXPECT_EQ(m.lost_spares[0].rank, 4);
}

}  // namespace
}  // namespace mirrored::elastic
