// The state a recovery puts together (elastic/state_recovery.h) when a hot spare has taken
// a lost rank's place and holds nothing: across real ranks, with exact answers.
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "mirrored/config/config.h"
#include "mirrored/elastic/state_recovery.h"
#include "mpi_env.h"

using namespace mirrored;

namespace {
comm::Communicator& world() { return test_runtime().world(); }

// A replicated snapshot at `step` whose every value is `value`.
checkpoint::ReplicaSnapshot snapshot_at(int64_t step, float value) {
  checkpoint::ReplicaSnapshot snapshot;
  io::Checkpoint& state = snapshot.checkpoint;
  state.step = step;
  state.steps_per_epoch = 100;
  state.optimizer_steps = step;
  state.params.push_back({"w", Shape{2, 3}, std::vector<float>(6, value)});
  state.buffers.push_back({"b", Shape{2}, std::vector<float>(2, value)});
  state.optimizer_state.push_back({"m", Shape{6}, std::vector<float>(6, value)});
  return snapshot;
}

TEST(StateRecovery, ASpareInTheChiefsPlaceLeavesTheWritingToTheLowestRankHoldingState) {
  if (world().size() < 3) GTEST_SKIP() << "needs 3 ranks: a called-in spare as rank 0 and two holders";
  // Rank 0: a spare just called in (nothing held). The others hold replicated state; the
  // last rank finished one step more (it saw the interrupted step's all-reduce complete).
  const int last = world().size() - 1;
  const bool called_in = world().rank() == 0;
  std::optional<checkpoint::ReplicaSnapshot> snapshot;
  if (!called_in) snapshot = world().rank() == last ? snapshot_at(8, 2.5f) : snapshot_at(7, 1.0f);
  elastic::Membership membership;
  membership.world_size = world().size();
  const config::TrainConfig config;
  const elastic::RecoveredState recovered = elastic::recover_state(world(), membership, config, snapshot, called_in);
  EXPECT_EQ(recovered.step, 8);
  EXPECT_EQ(recovered.writes, world().rank() == 1);  // rank 1: the lowest holding state
  if (!recovered.writes) return;
  const io::Checkpoint& state = recovered.checkpoint;
  EXPECT_EQ(state.step, 8);
  EXPECT_EQ(state.optimizer_steps, 8);
  EXPECT_EQ(state.step_in_epoch, 8);
  EXPECT_EQ(state.params[0].values, std::vector<float>(6, 2.5f));
  EXPECT_EQ(state.buffers[0].values, std::vector<float>(2, 2.5f));
  EXPECT_EQ(state.optimizer_state[0].values, std::vector<float>(6, 2.5f));
}

TEST(StateRecovery, WithoutASpareTheChiefWrites) {
  // The chief missed the interrupted step; every other survivor completed it and holds the
  // same bits (replicas that completed one step agree, or recovery refuses: next test).
  const auto rank = world().rank();
  const std::optional<checkpoint::ReplicaSnapshot> snapshot = snapshot_at(rank == 0 ? 4 : 5, rank == 0 ? 0.0f : 1.0f);
  elastic::Membership membership;
  membership.world_size = world().size();
  const config::TrainConfig config;
  const elastic::RecoveredState recovered = elastic::recover_state(world(), membership, config, snapshot);
  EXPECT_EQ(recovered.step, world().size() > 1 ? 5 : 4);
  EXPECT_EQ(recovered.writes, rank == 0);
  // Rank 1 (the lowest with 5 steps) sends its state to the chief.
  if (rank == 0 && world().size() > 1) EXPECT_EQ(recovered.checkpoint.params[0].values, std::vector<float>(6, 1.0f));
}

TEST(StateRecovery, SurvivorsOfOneStepThatDisagreeAreNamedAndNothingIsWritten) {
  if (world().size() < 3) GTEST_SKIP() << "needs 3 ranks: two that agree on step 5 and one that does not";
  // Every rank completed step 5; the last holds different bits (as after an all-reduce that
  // returned a wrong sum when a peer failed).
  const int last = world().size() - 1;
  const std::optional<checkpoint::ReplicaSnapshot> snapshot = snapshot_at(5, world().rank() == last ? 2.0f : 1.0f);
  elastic::Membership membership;
  membership.world_size = world().size();
  const config::TrainConfig config;
  try {
    elastic::recover_state(world(), membership, config, snapshot);
    ADD_FAILURE() << "recovery accepted survivors of step 5 that hold different state";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::kTooFewReplicas);
    const std::string message = error.what();
    EXPECT_NE(message.find("rank(s) " + std::to_string(last) + " differ from rank 0"), std::string::npos) << message;
    EXPECT_NE(message.find("Nothing was written"), std::string::npos) << message;
  }
}

}  // namespace
