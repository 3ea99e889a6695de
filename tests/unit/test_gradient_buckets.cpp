#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "mirrored/core/bf16.h"
#include "mirrored/comm/local_communicator.h"
#include "mirrored/distribute/gradient_buckets.h"
#include "mirrored/distribute/gradient_reducer.h"
#include "mirrored/nn/builders.h"

using namespace mirrored;
using distribute::BucketCaps;
using distribute::plan_buckets;

namespace {
// MLP 784-256-128-10: layers 0, 2, 4 hold parameters (ReLUs at 1, 3 do not).
nn::Model built_mlp() {
  auto model = nn::mlp({{256, 128}, 10});
  model.build({1, 28, 28});
  return model;
}
constexpr int64_t kLayer0 = 784 * 256 + 256, kLayer2 = 256 * 128 + 128, kLayer4 = 128 * 10 + 10;
}  // namespace

TEST(GradientBuckets, OneBucketHoldsEverythingInReverseLayerOrder) {
  auto model = built_mlp();
  const auto buckets = plan_buckets(model.parameters(), {int64_t{1} << 30, int64_t{1} << 30});
  ASSERT_EQ(buckets.size(), 1u);
  EXPECT_EQ(buckets[0].begin, 0);
  EXPECT_EQ(buckets[0].end, model.parameters().numel());
  EXPECT_EQ(buckets[0].layers, (std::vector<size_t>{4, 2, 0}));
}

TEST(GradientBuckets, CapsCloseBucketsWithoutSplittingLayers) {
  auto model = built_mlp();
  // The first cap closes after the last layer alone; the second after layer 2 alone.
  const BucketCaps caps{kLayer4 * 4, kLayer2 * 4};
  const auto buckets = plan_buckets(model.parameters(), caps);
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0].layers, (std::vector<size_t>{4}));
  EXPECT_EQ(buckets[1].layers, (std::vector<size_t>{2}));
  EXPECT_EQ(buckets[2].layers, (std::vector<size_t>{0}));
  EXPECT_EQ(buckets[0].numel(), kLayer4);
  EXPECT_EQ(buckets[1].numel(), kLayer2);
  EXPECT_EQ(buckets[2].numel(), kLayer0);
  // Contiguous, descending, covering the whole buffer exactly once.
  EXPECT_EQ(buckets[0].end, model.parameters().numel());
  EXPECT_EQ(buckets[1].end, buckets[0].begin);
  EXPECT_EQ(buckets[2].end, buckets[1].begin);
  EXPECT_EQ(buckets[2].begin, 0);
}

TEST(GradientBuckets, SmallFirstBucketThenLargeOnes) {
  auto model = built_mlp();
  const BucketCaps caps{1, (kLayer2 + kLayer0) * 4};
  const auto buckets = plan_buckets(model.parameters(), caps);
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].layers, (std::vector<size_t>{4}));
  EXPECT_EQ(buckets[1].layers, (std::vector<size_t>{2, 0}));
}

TEST(GradientReducer, LocalWorldAveragesOverMicroBatches) {
  auto model = built_mlp();
  comm::LocalCommunicator local;
  distribute::GradientReducer reducer(model.parameters(), local, {});
  auto& grads = model.parameters().flat_grads();
  std::fill_n(grads.data<float>(), grads.numel(), 6.0f);
  reducer.begin_step(3);
  for (size_t layer : {4, 3, 2, 1, 0}) reducer.on_layer_ready(layer);
  reducer.finish();
  for (float g : grads.to_vector()) ASSERT_EQ(g, 2.0f);
}

TEST(GradientReducer, Bf16HookRoundsEachBucketThenScales) {
  // A world of one still runs the hook: what travels is bf16, and the result is scaled.
  auto model = built_mlp();
  comm::LocalCommunicator local;
  distribute::ReducerOptions options;
  options.compression = distribute::GradCompression::kBf16;
  options.caps = {4096, 65536};  // several buckets, each with its own wire slot
  distribute::GradientReducer reducer(model.parameters(), local, options);
  ASSERT_GT(reducer.buckets().size(), 2u);
  auto& grads = model.parameters().flat_grads();
  for (int64_t i = 0; i < grads.numel(); ++i) grads.data<float>()[i] = 1.0f + static_cast<float>(i % 97) * 0x1p-10f;
  const auto before = grads.to_vector();
  reducer.begin_step(2);
  for (size_t layer : {4, 3, 2, 1, 0}) reducer.on_layer_ready(layer);
  reducer.finish();
  const auto after = grads.to_vector();
  for (size_t i = 0; i < after.size(); ++i)
    ASSERT_EQ(after[i], bf16_to_float(float_to_bf16(before[i])) * 0.5f) << "element " << i;
  EXPECT_EQ(reducer.last_step_stats().entry_times.size(), reducer.buckets().size());
}

TEST(GradientReducer, AutoOverlapNeedsAFreeCore) {
  using distribute::Overlap;
  EXPECT_EQ(distribute::resolve_overlap(Overlap::kAuto, 2, 2, 1), Overlap::kInline);
  EXPECT_EQ(distribute::resolve_overlap(Overlap::kAuto, 3, 2, 1), Overlap::kThread);
  EXPECT_EQ(distribute::resolve_overlap(Overlap::kInline, 64, 1, 1), Overlap::kInline);
  // A world of one has nothing to overlap.
  auto model = built_mlp();
  comm::LocalCommunicator local;
  distribute::GradientReducer reducer(model.parameters(), local, {});
  EXPECT_EQ(reducer.overlap(), Overlap::kOff);
}

TEST(GradientReducer, WaitsSpinOnlyWhereTheWaitingThreadHasACore) {
  using distribute::Overlap;
  using distribute::waits_may_spin;
  EXPECT_TRUE(waits_may_spin(Overlap::kInline, 2, 2, 1));   // 2 ranks x 1 thread on 2 cores
  EXPECT_FALSE(waits_may_spin(Overlap::kInline, 2, 4, 1));  // 4 ranks on 2 cores: oversubscribed
  EXPECT_FALSE(waits_may_spin(Overlap::kOff, 2, 2, 2));     // 2 ranks x 2 threads on 2 cores
  EXPECT_TRUE(waits_may_spin(Overlap::kThread, 4, 2, 1));   // a core per compute and comm thread
  EXPECT_FALSE(waits_may_spin(Overlap::kThread, 3, 2, 1));  // the comm threads would share one core
}

TEST(Bf16, RoundsToNearestEvenAndKeepsSpecialValues) {
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f)), 1.0f);
  EXPECT_EQ(bf16_to_float(float_to_bf16(-3.5f)), -3.5f);
  // 1 + 2^-8 lies halfway between bf16 neighbours 1 and 1 + 2^-7: ties go to even (1).
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 0x1p-8f)), 1.0f);
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 0x1p-8f + 0x1p-12f)), 1.0f + 0x1p-7f);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
  EXPECT_TRUE(std::isinf(bf16_to_float(float_to_bf16(INFINITY))));
}

TEST(LocalCommunicator, ReduceScatterCopiesAndAllgatherKeepsTheOnePiece) {
  comm::LocalCommunicator local;
  const std::vector<float> send = {1.0f, 2.0f, 3.0f};
  std::vector<float> recv(3, 0.0f);
  local.reduce_scatter(send.data(), recv.data(), {3}, comm::DataType::kF32, comm::ReduceOp::kMean);
  EXPECT_EQ(recv, send);
  local.allgather_inplace(recv.data(), {3}, comm::DataType::kF32);
  EXPECT_EQ(recv, send);
}

TEST(GradientReducer, AWorldOfOneIsNeverSharded) {
  auto model = built_mlp();
  comm::LocalCommunicator local;
  distribute::ReducerOptions options;
  options.shard = true;
  distribute::GradientReducer reducer(model.parameters(), local, options);
  EXPECT_FALSE(reducer.sharded());
  EXPECT_EQ(reducer.owned_range(), (optim::ArenaRange{0, model.parameters().numel()}));
}
