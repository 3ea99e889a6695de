// Collectives with exact expected answers: buffers filled from the rank number.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <thread>
#include <vector>

#include "mirrored/comm/communicator.h"
#include "mpi_env.h"

using mirrored::comm::ReduceOp;

namespace {
mirrored::comm::Communicator& world() { return test_runtime().world(); }
}  // namespace

TEST(Collectives, AllreduceSumOfRankFilledFloats) {
  const int n = world().size(), r = world().rank();
  std::vector<float> buffer(1000);
  for (size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<float>(r + 1) * static_cast<float>(i);
  world().allreduce(buffer.data(), buffer.size(), ReduceOp::kSum);
  const float ranks_sum = static_cast<float>(n * (n + 1) / 2);  // 1 + 2 + ... + n
  for (size_t i = 0; i < buffer.size(); ++i) ASSERT_EQ(buffer[i], ranks_sum * static_cast<float>(i)) << "i=" << i;
}

TEST(Collectives, AllreduceMeanIsSumOverSize) {
  const int n = world().size(), r = world().rank();
  std::vector<double> buffer(17, static_cast<double>(r));
  world().allreduce(buffer.data(), buffer.size(), ReduceOp::kMean);
  for (double v : buffer) ASSERT_DOUBLE_EQ(v, (n - 1) / 2.0);
}

TEST(Collectives, AllreduceMaxMinInt64) {
  const int n = world().size(), r = world().rank();
  EXPECT_EQ(world().allreduce_value<int64_t>(r * 10, ReduceOp::kMax), (n - 1) * 10);
  EXPECT_EQ(world().allreduce_value<int64_t>(r * 10 + 5, ReduceOp::kMin), 5);
}

TEST(Collectives, BroadcastFromEveryRoot) {
  const int n = world().size(), r = world().rank();
  for (int root = 0; root < n; ++root) {
    std::vector<int32_t> buffer(33, r == root ? 1000 + root : -1);
    world().broadcast(buffer.data(), buffer.size(), root);
    for (int32_t v : buffer) ASSERT_EQ(v, 1000 + root);
  }
}

TEST(Collectives, AllgatherPlacesEachRankAtItsOffset) {
  const int n = world().size(), r = world().rank();
  const size_t count = 5;
  std::vector<float> send(count);
  for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>(r * 100 + static_cast<int>(i));
  std::vector<float> recv(count * static_cast<size_t>(n), -1.0f);
  world().allgather(send.data(), recv.data(), count, mirrored::comm::DataType::kF32);
  for (int src = 0; src < n; ++src)
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(recv[static_cast<size_t>(src) * count + i], static_cast<float>(src * 100 + static_cast<int>(i)));
}

TEST(Collectives, AllgatherStringsOfDifferentLengths) {
  const int n = world().size(), r = world().rank();
  const auto all = world().allgather_strings(std::string(static_cast<size_t>(r + 1), static_cast<char>('a' + r)));
  ASSERT_EQ(static_cast<int>(all.size()), n);
  for (int src = 0; src < n; ++src)
    EXPECT_EQ(all[static_cast<size_t>(src)], std::string(static_cast<size_t>(src + 1), static_cast<char>('a' + src)));
}

TEST(Collectives, NoRankLeavesTheBarrierBeforeTheLastOneEntered) {
  // The last rank enters late; each rank notes (on the system clock, which the ranks of one
  // host share) when it entered and left, and the notes travel by a second channel, an
  // all-gather after the barrier. Every exit must come after the latest entry.
  const int n = world().size(), r = world().rank();
  using Clock = std::chrono::system_clock;
  auto now = [] { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); };
  constexpr double kLateBy = 0.2;
  if (r == n - 1) std::this_thread::sleep_for(std::chrono::duration<double>(kLateBy));
  const double entered = now();
  world().barrier();
  const double left = now();
  const auto entries = world().allgather_value<double>(entered);
  const auto exits = world().allgather_value<double>(left);
  const double last_entry = *std::max_element(entries.begin(), entries.end());
  for (int src = 0; src < n; ++src) {
    EXPECT_GE(exits[static_cast<size_t>(src)], last_entry) << "rank " << src << " left before rank " << n - 1 << " entered";
    if (src != n - 1) {  // and so it really waited for the late rank
      EXPECT_GE(exits[static_cast<size_t>(src)] - entries[static_cast<size_t>(src)], kLateBy * 0.5) << "rank " << src;
    }
  }
}

TEST(Cluster, TableCoversEveryRankWithConsistentLocalRanks) {
  const auto& cluster = test_runtime().cluster();
  ASSERT_EQ(cluster.world_size(), world().size());
  for (const auto& p : cluster.placements()) {
    int earlier_on_host = 0;
    for (const auto& q : cluster.placements())
      if (q.rank < p.rank && q.host == p.host) ++earlier_on_host;
    EXPECT_EQ(p.local_rank, earlier_on_host) << "rank " << p.rank;
  }
}
