// Straggler scores against the median rank and the window that turns them into records
// (train/straggler.h).
#include <gtest/gtest.h>

#include "mirrored/train/straggler.h"

namespace mirrored::train {
namespace {

TEST(StragglerScores, ARankTwiceAsSlowScoresAboutHalf) {
  // data, forward, backward, optimizer seconds per step; rank 1's backward takes twice as long.
  const std::vector<PhaseSeconds> seconds{{0.0, 0.010, 0.020, 0.002}, {0.0, 0.010, 0.040, 0.002},
                                          {0.0, 0.010, 0.020, 0.002}};
  const auto scores = straggler_scores(seconds);
  // floor = 10% of the median total (0.032 s) = 0.0032 s
  EXPECT_NEAR(scores[1][2], (0.020 + 0.0032) / (0.040 + 0.0032), 1e-12);
  EXPECT_NEAR(scores[0][2], 1.0, 1e-12);
  EXPECT_NEAR(scores[1][1], 1.0, 1e-12);
  EXPECT_NEAR(scores[1][0], 1.0, 1e-12);  // no data time anywhere: no signal
  const RankScore lowest = lowest_score(scores[1]);
  EXPECT_EQ(lowest.phase, 2);
  EXPECT_STREQ(scored_phase_name(lowest.phase), "backward");
}

TEST(StragglerScores, TwoRanksAreScoredAgainstTheFasterOne) {
  // The lower median: with two ranks the slow one is not half its own reference.
  const auto scores = straggler_scores({{0.0, 0.0, 0.010, 0.0}, {0.0, 0.0, 0.020, 0.0}});
  EXPECT_NEAR(scores[1][2], (0.010 + 0.001) / (0.020 + 0.001), 1e-12);
  EXPECT_LT(scores[1][2], 0.75);
  EXPECT_DOUBLE_EQ(scores[0][2], 1.0);  // the faster rank is the reference
}

TEST(StragglerScores, MicrosecondPhasesDoNotTurnNoiseIntoScores) {
  // 2 us against 1 us of data loading beside a 20 ms step: a score near 1, not 0.5.
  const auto scores = straggler_scores({{1e-6, 0.01, 0.01, 0.0}, {2e-6, 0.01, 0.01, 0.0}});
  EXPECT_GT(scores[1][0], 0.99);
}

TEST(StragglerTracker, FlagsOnlyAfterTheWindowAndStartsAgainWhenFast) {
  StragglerTracker tracker(0.75, 3);
  const std::vector<PhaseSeconds> slow{{1, 1, 1, 1}, {1, 1, 0.5, 1}};
  const std::vector<PhaseSeconds> fine{{1, 1, 1, 1}, {1, 1, 0.9, 1}};
  EXPECT_TRUE(tracker.update(slow).empty());
  EXPECT_TRUE(tracker.update(slow).empty());
  const auto flags = tracker.update(slow);
  ASSERT_EQ(flags.size(), 1u);
  EXPECT_EQ(flags[0].rank, 1);
  EXPECT_EQ(flags[0].phase, 2);
  EXPECT_DOUBLE_EQ(flags[0].score, 0.5);
  EXPECT_EQ(flags[0].points, 3);
  EXPECT_EQ(tracker.update(slow).size(), 1u);  // still slow: still reported
  EXPECT_TRUE(tracker.update(fine).empty());
  EXPECT_TRUE(tracker.update(slow).empty());   // counting starts again
}

TEST(StragglerTracker, WarmUpPointsAreNotCounted) {
  StragglerTracker tracker(0.75, 1, 2);
  const std::vector<PhaseSeconds> slow{{1, 1, 1, 1}, {1, 1, 0.5, 1}};
  EXPECT_TRUE(tracker.update(slow).empty());
  EXPECT_TRUE(tracker.update(slow).empty());
  EXPECT_EQ(tracker.update(slow).size(), 1u);
}

}  // namespace
}  // namespace mirrored::train
