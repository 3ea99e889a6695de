#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "mirrored/comm/local_communicator.h"
#include "mirrored/core/cpu_affinity.h"
#include "mirrored/runtime/cluster.h"
#include "mirrored/runtime/core_binding.h"

namespace mirrored {
namespace {

using runtime::BindCores;
using runtime::plan_core_binding;
using Cores = std::vector<std::vector<int>>;

Cores single_cpu_cores(int n) {
  Cores cores;
  for (int c = 0; c < n; ++c) cores.push_back({c});
  return cores;
}

TEST(CoreBinding, SplitsCoresIntoContiguousRunsByLocalRank) {
  const Cores four = single_cpu_cores(4);
  EXPECT_EQ(cores_for_local_rank(four, 0, 2), (std::vector<int>{0, 1}));
  EXPECT_EQ(cores_for_local_rank(four, 1, 2), (std::vector<int>{2, 3}));
  EXPECT_EQ(cores_for_local_rank(four, 3, 4), (std::vector<int>{3}));
  EXPECT_EQ(cores_for_local_rank(four, 0, 1), (std::vector<int>{0, 1, 2, 3}));
  // Five cores over two ranks: the first run takes the remainder.
  const Cores five = single_cpu_cores(5);
  EXPECT_EQ(cores_for_local_rank(five, 0, 2), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(cores_for_local_rank(five, 1, 2), (std::vector<int>{3, 4}));
}

TEST(CoreBinding, KeepsHyperthreadSiblingsWithTheirCore) {
  // Linux numbers SMT siblings i and i+4 on a 4-core, 8-thread CPU: two ranks must not
  // split a core between them.
  const Cores smt = {{0, 4}, {1, 5}, {2, 6}, {3, 7}};
  EXPECT_EQ(cores_for_local_rank(smt, 0, 2), (std::vector<int>{0, 1, 4, 5}));
  EXPECT_EQ(cores_for_local_rank(smt, 1, 2), (std::vector<int>{2, 3, 6, 7}));
}

TEST(CoreBinding, NoSplitWhenRanksOutnumberCores) {
  EXPECT_TRUE(cores_for_local_rank(single_cpu_cores(2), 3, 4).empty());
}

TEST(CoreBinding, PlanBindsOnlyWhenEveryRankFoundTheSameMask) {
  const std::vector<int> all = {0, 1, 2, 3};
  const Cores cores = single_cpu_cores(4);
  const auto bound = plan_core_binding(BindCores::kAuto, all, {all, all}, 1, cores);
  EXPECT_EQ(bound.cpus, (std::vector<int>{2, 3}));
  EXPECT_EQ(bound.note, "cpus 2-3");

  // A launcher that bound the ranks gave them different masks: leave them.
  const auto launcher = plan_core_binding(BindCores::kAuto, {0, 1}, {{0, 1}, {2, 3}}, 0, {{0}, {1}});
  EXPECT_TRUE(launcher.cpus.empty());
  EXPECT_NE(launcher.note.find("launcher"), std::string::npos) << launcher.note;

  // Oversubscribed: four ranks on two cores.
  const std::vector<int> two = {0, 1};
  const auto crowded = plan_core_binding(BindCores::kAuto, two, {two, two, two, two}, 2, single_cpu_cores(2));
  EXPECT_TRUE(crowded.cpus.empty());
  EXPECT_NE(crowded.note.find("4 ranks share 2 core(s)"), std::string::npos) << crowded.note;

  // One rank already on all of its cores: nothing to change.
  EXPECT_TRUE(plan_core_binding(BindCores::kAuto, all, {all}, 0, cores).cpus.empty());

  const auto off = plan_core_binding(BindCores::kOff, all, {all, all}, 1, cores);
  EXPECT_TRUE(off.cpus.empty());
  EXPECT_EQ(off.found, all);
}

TEST(CoreBinding, CpuListText) {
  EXPECT_EQ(cpu_list_str({0, 1, 2, 3, 8}), "0-3,8");
  EXPECT_EQ(cpu_list_str({5}), "5");
  EXPECT_EQ(cpu_list_str({0, 2, 3}), "0,2-3");
}

TEST(CoreBinding, OffAndASingleRankLeaveTheMaskAlone) {
  const std::vector<int> before = allowed_cpus();
  comm::LocalCommunicator world;
  const auto cluster = runtime::Cluster::discover(world);
  const auto off = runtime::bind_cores(BindCores::kOff, world, cluster);
  EXPECT_TRUE(off.cpus.empty());
  EXPECT_EQ(allowed_cpus(), before);
  // One rank on the host takes every core it found: the same mask.
  const auto single = runtime::bind_cores(BindCores::kAuto, world, cluster);
  EXPECT_TRUE(single.cpus.empty());
  EXPECT_EQ(allowed_cpus(), before);
}

TEST(CoreBinding, BindingMovesThreadsStartedBefore) {
  const std::vector<int> before = allowed_cpus();
  ASSERT_FALSE(before.empty());
  std::mutex mutex;
  std::condition_variable changed;
  bool bound = false;
  std::vector<int> seen_by_thread;
  std::thread early([&] {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return bound; });
    seen_by_thread = allowed_cpus();
  });
  bind_process_to_cpus({before.back()});
  EXPECT_EQ(allowed_cpus(), (std::vector<int>{before.back()}));
  {
    std::lock_guard lock(mutex);
    bound = true;
  }
  changed.notify_all();
  early.join();
  EXPECT_EQ(seen_by_thread, (std::vector<int>{before.back()}));
  bind_process_to_cpus(before);
  EXPECT_EQ(allowed_cpus(), before);
}

}  // namespace
}  // namespace mirrored
