// Shard copies under on_failure = shrink: where each shard's copy goes (keepers on other
// hosts), which step the survivors can rebuild and from whom, and the state put together
// from the pieces. The exchange itself runs across real ranks in tests/mpi/test_sharding.cpp.
#include <gtest/gtest.h>

#include <numeric>

#include "mirrored/distribute/shard_copies.h"
#include "mirrored/elastic/shard_recovery.h"

using namespace mirrored;
using elastic::HeldPiece;

TEST(ShardCopies, KeepersSitOnAnotherHostWhenTheRanksSpanSeveral) {
  using distribute::ShardCopies;
  EXPECT_EQ(ShardCopies::keeper_distance({"a", "a", "b", "b"}), 2);
  EXPECT_EQ(ShardCopies::keeper_distance({"a", "a", "a", "b", "b", "b"}), 3);
  EXPECT_EQ(ShardCopies::keeper_distance({"a", "b", "a", "b"}), 1);
  // One host, or hosts of unequal sizes that no rotation separates: the next rank.
  EXPECT_EQ(ShardCopies::keeper_distance({"a", "a", "a"}), 1);
  EXPECT_EQ(ShardCopies::keeper_distance({"a", "a", "a", "b"}), 1);
  EXPECT_EQ(ShardCopies::keeper_distance({"a"}), 1);
}

TEST(ShardHolders, TheNewestStepAtWhichEveryShardSurvives) {
  // World of 4, keeper = rank + 1; rank 2 lost during step 8's all-gather. Ranks 0, 1 and
  // 3 had updated (own at 8, previous at 7); rank 3 keeps rank 2's shard as of step 7.
  const std::vector<std::vector<HeldPiece>> held = {
      {{0, 8}, {0, 7}, {3, 7}},  // rank 0: own, previous, ward 3
      {{1, 8}, {1, 7}, {0, 7}},  // rank 1
      {{3, 8}, {3, 7}, {2, 7}},  // rank 3
  };
  const elastic::ShardHolders choice = elastic::choose_shard_holders(held, 4);
  EXPECT_EQ(choice.step, 7);
  EXPECT_EQ(choice.holder, (std::vector<int>{0, 1, 2, 0}));
  EXPECT_TRUE(choice.lost_shards.empty());

  // Every exchange of step 8 done: step 8 everywhere.
  const std::vector<std::vector<HeldPiece>> settled = {{{0, 8}, {0, 7}, {3, 8}}, {{1, 8}, {1, 7}, {0, 8}},
                                                       {{3, 8}, {3, 7}, {2, 8}}};
  EXPECT_EQ(elastic::choose_shard_holders(settled, 4).step, 8);
}

TEST(ShardHolders, AShardWhoseOwnerAndKeeperAreBothLostIsNamed) {
  // Ranks 1 and 2 lost; rank 1's keeper is rank 2.
  const std::vector<std::vector<HeldPiece>> held = {{{0, 5}, {3, 5}}, {{3, 5}, {2, 5}}};
  const elastic::ShardHolders choice = elastic::choose_shard_holders(held, 4);
  EXPECT_EQ(choice.step, -1);
  EXPECT_EQ(choice.lost_shards, std::vector<int>{1});
}

TEST(ShardHolders, NoCommonStepIsNotARecovery) {
  const std::vector<std::vector<HeldPiece>> held = {{{0, 6}}, {{1, 5}}};
  const elastic::ShardHolders choice = elastic::choose_shard_holders(held, 2);
  EXPECT_EQ(choice.step, -1);
  EXPECT_TRUE(choice.lost_shards.empty());
}

TEST(StateAssembly, PiecesLandInTheirSlicesOfParametersAndState) {
  // 10 elements over 3 shards (3, 3, 4), two state tensors: piece k holds its parameter
  // slice, then each state tensor's slice.
  const auto plan = distribute::ShardPlan::make(10, 3, true);
  elastic::StateAssembly assembly(plan, 2);
  for (int shard = 0; shard < 3; ++shard) {
    const optim::ArenaRange range = plan.shard(shard);
    std::vector<float> piece;
    for (int tensor = 0; tensor < 3; ++tensor)
      for (int64_t i = range.begin; i < range.end; ++i) piece.push_back(static_cast<float>(100 * tensor + i));
    ASSERT_EQ(piece.size(), assembly.piece_floats(shard));
    EXPECT_FALSE(assembly.complete());
    assembly.place(shard, piece);
  }
  EXPECT_TRUE(assembly.complete());
  for (int64_t i = 0; i < 10; ++i) {
    EXPECT_EQ(assembly.params()[static_cast<size_t>(i)], static_cast<float>(i));
    EXPECT_EQ(assembly.state()[0][static_cast<size_t>(i)], static_cast<float>(100 + i));
    EXPECT_EQ(assembly.state()[1][static_cast<size_t>(i)], static_cast<float>(200 + i));
  }
  EXPECT_THROW(assembly.place(2, std::vector<float>(5)), Error);
}
