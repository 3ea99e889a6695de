// Which GPU a rank takes, under fake environments for each launch mode: srun with one GPU
// per task, mpirun with every GPU visible (on one node, and on remote nodes that inherited
// a Slurm --gpus-per-task), the MIRRORED_CUDA_DEVICE override, and the refusals.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "mirrored/core/error.h"
#include "mirrored/runtime/device_choice.h"

namespace mirrored::distribute {
namespace {

using Env = std::map<std::string, std::string>;

runtime::DeviceQuery query(int local_rank, int local_size, int visible, const Env& env = {}) {
  return runtime::DeviceQuery::from(local_rank, local_size, visible, [&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(DeviceChoiceRules, SrunWithOneGpuPerTaskTakesDeviceZeroOnEveryRank) {
  // srun --ntasks-per-node=4 --gpus-per-task=1: each task sees its own GPU as device 0.
  for (int local = 0; local < 4; ++local) {
    const auto pick = runtime::pick_cuda_device(query(local, 4, 1, {{"CUDA_VISIBLE_DEVICES", std::to_string(local)}}));
    ASSERT_TRUE(pick.ok()) << pick.reason;
    EXPECT_EQ(pick.index, 0) << "local rank " << local;
  }
}

TEST(DeviceChoiceRules, MpirunWithAllGpusVisibleTakesTheLocalRank) {
  for (int local = 0; local < 8; ++local) {
    const auto pick = runtime::pick_cuda_device(query(local, 8, 8));
    ASSERT_TRUE(pick.ok()) << pick.reason;
    EXPECT_EQ(pick.index, local);
  }
}

TEST(DeviceChoiceRules, MpirunAcrossNodesWithAnInheritedNarrowingFollowsWhatIsVisible) {
  // mpirun inside an allocation made with --gpus-per-task=1: a remote rank with local rank
  // 1 sees one GPU; choosing device 1 would fail with "invalid device ordinal".
  const auto pick = runtime::pick_cuda_device(query(1, 2, 1, {{"CUDA_VISIBLE_DEVICES", "1"}}));
  ASSERT_TRUE(pick.ok()) << pick.reason;
  EXPECT_EQ(pick.index, 0);
}

TEST(DeviceChoiceRules, OverrideWinsOverTheLocalRank) {
  const auto pick = runtime::pick_cuda_device(query(0, 2, 4, {{"MIRRORED_CUDA_DEVICE", "3"}}));
  ASSERT_TRUE(pick.ok()) << pick.reason;
  EXPECT_EQ(pick.index, 3);
}

TEST(DeviceChoiceRules, OverrideBeyondTheVisibleCountIsRefusedWithTheCounts) {
  const auto pick =
      runtime::pick_cuda_device(query(0, 1, 2, {{"MIRRORED_CUDA_DEVICE", "2"}, {"CUDA_VISIBLE_DEVICES", "4,5"}}));
  EXPECT_FALSE(pick.ok());
  EXPECT_EQ(pick.index, -1);
  EXPECT_TRUE(contains(pick.reason, "MIRRORED_CUDA_DEVICE=2")) << pick.reason;
  EXPECT_TRUE(contains(pick.reason, "2 GPU(s) are visible")) << pick.reason;
  EXPECT_TRUE(contains(pick.reason, "CUDA_VISIBLE_DEVICES='4,5'")) << pick.reason;
  EXPECT_TRUE(contains(pick.reason, "0..1")) << pick.reason;
}

TEST(DeviceChoiceRules, OverrideWithNoVisibleGpuIsRefused) {
  const auto pick = runtime::pick_cuda_device(query(0, 1, 0, {{"MIRRORED_CUDA_DEVICE", "0"}}));
  EXPECT_FALSE(pick.ok());
  EXPECT_TRUE(contains(pick.reason, "0 GPU(s) are visible")) << pick.reason;
}

TEST(DeviceChoiceRules, MalformedOverrideIsAUsageError) {
  for (const char* bad : {"first", "-1", "1x", " 1", "+1", "99999999999999999999"}) {
    try {
      runtime::pick_cuda_device(query(0, 1, 2, {{"MIRRORED_CUDA_DEVICE", bad}}));
      ADD_FAILURE() << "MIRRORED_CUDA_DEVICE='" << bad << "' accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(e.code(), ExitCode::kUsage);
      EXPECT_TRUE(contains(e.what(), "MIRRORED_CUDA_DEVICE")) << e.what();
    }
  }
}

TEST(DeviceChoiceRules, EmptyOverrideMeansUnset) {
  const auto pick = runtime::pick_cuda_device(query(1, 2, 2, {{"MIRRORED_CUDA_DEVICE", ""}}));
  ASSERT_TRUE(pick.ok()) << pick.reason;
  EXPECT_EQ(pick.index, 1);
}

TEST(DeviceChoiceRules, MoreRanksThanVisibleGpusIsRefusedNamingTheWayOut) {
  const auto pick = runtime::pick_cuda_device(query(2, 4, 2));
  EXPECT_FALSE(pick.ok());
  EXPECT_TRUE(contains(pick.reason, "local rank 2 of 4")) << pick.reason;
  EXPECT_TRUE(contains(pick.reason, "only 2 GPU(s) are visible")) << pick.reason;
  EXPECT_TRUE(contains(pick.reason, "MIRRORED_CUDA_DEVICE")) << pick.reason;
}

TEST(DeviceChoiceRules, HiddenDevicesAreNoDeviceAndSaySo) {
  const auto pick = runtime::pick_cuda_device(query(0, 1, 0, {{"CUDA_VISIBLE_DEVICES", ""}}));
  EXPECT_FALSE(pick.ok());
  EXPECT_TRUE(contains(pick.reason, "no GPU is visible (CUDA_VISIBLE_DEVICES='')")) << pick.reason;
}

TEST(DeviceChoiceRules, QueryReadsOnlyItsTwoVariables) {
  const auto q = query(3, 4, 2, {{"MIRRORED_CUDA_DEVICE", "1"}, {"SLURM_LOCALID", "0"}});
  EXPECT_EQ(q.local_rank, 3);
  EXPECT_EQ(q.local_size, 4);
  EXPECT_EQ(q.visible, 2);
  EXPECT_EQ(q.override_index, "1");
  EXPECT_FALSE(q.visible_list_set);
}

}  // namespace
}  // namespace mirrored::distribute
