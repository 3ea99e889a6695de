// The bucketed, overlapped all-reduce across real ranks: identical layout everywhere,
// results independent of overlap and bucket size, accumulation equal to a larger batch.
//
// Overlap modes are compared bit for bit: the reducer starts every bucket with the same
// nonblocking all-reduce (MPI_Iallreduce of the same count on the same communicator) in
// every mode, from the backward hook, the communication thread or finish(), so the
// reduction algorithm and its summation order are the same (gradient_reducer.h).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "mirrored/core/bf16.h"
#include "mirrored/distribute/strategy.h"
#include "mirrored/nn/builders.h"
#include "mirrored/nn/loss.h"
#include "mpi_env.h"
#include "relative_difference.h"

using namespace mirrored;

namespace {
constexpr int64_t kFeatures = 20, kClasses = 5;

// A deterministic batch that differs per rank and per micro-batch index.
void fill_batch(Tensor& x, Tensor& y, int64_t rows, int rank, int micro) {
  ensure_shape(x, {rows, kFeatures});
  ensure_shape(y, {rows}, DType::kI32);
  Rng rng(1234, static_cast<uint64_t>(rank * 100 + micro));
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = rng.uniform(-1.0f, 1.0f);
  for (int64_t i = 0; i < rows; ++i) y.data<int32_t>()[i] = static_cast<int32_t>(rng.below(kClasses));
}

// Gradients after one synchronised step of `micro_batches` x `rows` samples per replica.
std::vector<float> step_gradients(distribute::ReducerOptions options, int micro_batches, int64_t rows,
                                  const std::vector<std::pair<int64_t, int>>& batches) {
  distribute::MirroredStrategy strategy(test_runtime());
  distribute::ModelOptions model_options{{kFeatures}, 9, options, micro_batches};
  auto model = strategy.scope([] { return nn::mlp({{64, 48, 32}, kClasses}); }, model_options);
  nn::CrossEntropyLoss loss;
  Tensor x, y;
  model.zero_grad();
  for (const auto& [batch_rows, micro] : batches) {
    (void)rows;
    fill_batch(x, y, batch_rows, strategy.replica_id(), micro);
    loss.forward(model.forward(x, nn::Mode::kTrain), y);
    model.backward(loss.grad());
  }
  model.synchronize_gradients();
  return model.parameters().flat_grads().to_vector();
}

distribute::ReducerOptions small_buckets(distribute::Overlap overlap) {
  distribute::ReducerOptions options;
  options.caps = {1, 4 * 1024};  // several buckets for this model
  options.overlap = overlap;
  return options;
}
distribute::ReducerOptions small_buckets(bool overlap) {
  return small_buckets(overlap ? distribute::Overlap::kThread : distribute::Overlap::kOff);
}
}  // namespace

TEST(GradientReducer, BucketLayoutIsIdenticalOnEveryRank) {
  distribute::MirroredStrategy strategy(test_runtime());
  auto model = strategy.scope([] { return nn::mlp({{64, 48, 32}, kClasses}); }, {{kFeatures}, 1, small_buckets(true)});
  const auto& buckets = model.reducer().buckets();
  ASSERT_GT(buckets.size(), 2u) << "the test needs several buckets";
  std::vector<int64_t> bounds;
  for (const auto& b : buckets) bounds.insert(bounds.end(), {b.begin, b.end});
  std::vector<int64_t> all(bounds.size() * static_cast<size_t>(strategy.num_replicas_in_sync()));
  strategy.communicator().allgather(bounds.data(), all.data(), bounds.size(), comm::DataType::kI64);
  for (int r = 0; r < strategy.num_replicas_in_sync(); ++r)
    EXPECT_TRUE(std::equal(bounds.begin(), bounds.end(), all.begin() + static_cast<int64_t>(r * bounds.size())))
        << "rank " << r << " planned other buckets";
}

TEST(GradientReducer, OverlapModesAreBitIdentical) {
  using distribute::Overlap;
  const auto sequential = step_gradients(small_buckets(Overlap::kOff), 1, 16, {{16, 0}});
  for (Overlap mode : {Overlap::kThread, Overlap::kInline, Overlap::kAuto}) {
    const auto overlapped = step_gradients(small_buckets(mode), 1, 16, {{16, 0}});
    ASSERT_EQ(overlapped.size(), sequential.size());
    EXPECT_EQ(std::memcmp(overlapped.data(), sequential.data(), overlapped.size() * sizeof(float)), 0)
        << distribute::overlap_name(mode);
  }
}

TEST(GradientReducer, AutoOverlapTakesAThreadOnlyWhereACoreIsFree) {
  using distribute::Overlap;
  using distribute::resolve_overlap;
  EXPECT_EQ(resolve_overlap(Overlap::kAuto, 2, 2, 1), Overlap::kInline);   // 2 ranks x 1 thread on 2 cores
  EXPECT_EQ(resolve_overlap(Overlap::kAuto, 2, 1, 2), Overlap::kInline);   // 1 rank x 2 threads on 2 cores
  EXPECT_EQ(resolve_overlap(Overlap::kAuto, 16, 2, 4), Overlap::kThread);  // 8 of 16 cores busy
  EXPECT_EQ(resolve_overlap(Overlap::kAuto, 4, 2, 2), Overlap::kInline);
  EXPECT_EQ(resolve_overlap(Overlap::kThread, 2, 2, 1), Overlap::kThread);  // explicit choices stand
  EXPECT_EQ(resolve_overlap(Overlap::kOff, 64, 1, 1), Overlap::kOff);
  // A reducer resolves kAuto from what it is told.
  distribute::MirroredStrategy strategy(test_runtime());
  distribute::ReducerOptions options = small_buckets(Overlap::kAuto);
  options.compute_threads = 1 << 16;  // more threads than any host has cores
  auto model = strategy.scope([] { return nn::mlp({{8}, kClasses}); }, {{kFeatures}, 1, options});
  if (strategy.num_replicas_in_sync() > 1) EXPECT_EQ(model.reducer().overlap(), Overlap::kInline);
}

TEST(GradientReducer, StatsCountEveryBucketAndThePeerWaitIsTheLateRanksDelay) {
  using distribute::Overlap;
  distribute::MirroredStrategy strategy(test_runtime());
  const int n = strategy.num_replicas_in_sync();
  for (Overlap mode : {Overlap::kOff, Overlap::kThread, Overlap::kInline}) {
    auto model = strategy.scope([] { return nn::mlp({{64, 48, 32}, kClasses}); }, {{kFeatures}, 9, small_buckets(mode)});
    nn::CrossEntropyLoss loss;
    Tensor x, y;
    fill_batch(x, y, 16, strategy.replica_id(), 0);
    model.zero_grad();
    loss.forward(model.forward(x, nn::Mode::kTrain), y);
    // The last rank arrives late: the others' collectives wait for it.
    constexpr double kLateBy = 0.1;
    if (n > 1 && strategy.replica_id() == n - 1) std::this_thread::sleep_for(std::chrono::duration<double>(kLateBy));
    model.backward(loss.grad());
    model.synchronize_gradients();
    const auto& stats = model.comm_stats();
    const auto& buckets = model.reducer().buckets();
    ASSERT_EQ(stats.entry_times.size(), buckets.size()) << distribute::overlap_name(mode);
    for (double t : stats.entry_times) EXPECT_GT(t, 0.0) << "every bucket started";
    EXPECT_EQ(stats.bytes, model.parameters().flat_grads().numel() * static_cast<int64_t>(sizeof(float)));
    EXPECT_GE(stats.comm_seconds, 0.0);
    EXPECT_GT(stats.transform_seconds, 0.0) << "scaling by 1/n takes some time";
    const double waited = distribute::peer_wait_seconds(stats, strategy.communicator());
    if (n > 1 && strategy.replica_id() == 0)
      EXPECT_GE(waited, kLateBy * 0.5) << "rank 0 waited for the late rank (" << distribute::overlap_name(mode) << ")";
    const auto waits = strategy.communicator().allgather_value<double>(waited);
    if (n > 1) EXPECT_LT(waits[static_cast<size_t>(n - 1)], waits[0]) << "the late rank waited least";
    // Inside the collectives proper, the wait for the late rank is visible only on the others.
    if (n > 1 && strategy.replica_id() == 0) EXPECT_GE(stats.comm_seconds, kLateBy * 0.5);
  }
}

TEST(GradientReducer, ManyBucketsEqualOneBucketToTolerance) {
  distribute::ReducerOptions one_bucket;
  one_bucket.caps = {int64_t{1} << 30, int64_t{1} << 30};
  const auto bucketed = step_gradients(small_buckets(true), 1, 16, {{16, 0}});
  const auto whole = step_gradients(one_bucket, 1, 16, {{16, 0}});
  // The same sums over ranks; only MPI's algorithm per message size (hence the order of a
  // 4-term float sum) may differ: a few ulps.
  EXPECT_LE(max_relative_difference(bucketed, whole), 1e-6);
}

TEST(GradientReducer, GradientsAreTheMeanOverReplicas) {
  // Reference: the plain sum of every rank's local gradient, computed through allgather.
  distribute::MirroredStrategy strategy(test_runtime());
  const int n = strategy.num_replicas_in_sync();
  auto model = strategy.scope([] { return nn::mlp({{16}, kClasses}); }, {{kFeatures}, 2, small_buckets(true)});
  nn::CrossEntropyLoss loss;
  Tensor x, y;
  fill_batch(x, y, 8, strategy.replica_id(), 0);
  model.zero_grad();
  loss.forward(model.forward(x, nn::Mode::kTrain), y);
  model.module().backward(loss.grad());  // local gradients only
  const auto local = model.parameters().flat_grads().to_vector();
  std::vector<float> all(local.size() * static_cast<size_t>(n));
  strategy.communicator().allgather(local.data(), all.data(), local.size(), comm::DataType::kF32);
  model.zero_grad();
  loss.forward(model.forward(x, nn::Mode::kTrain), y);
  model.backward(loss.grad());
  model.synchronize_gradients();
  const auto averaged = model.parameters().flat_grads().to_vector();
  for (size_t i = 0; i < local.size(); ++i) {
    double sum = 0;
    for (int r = 0; r < n; ++r) sum += all[static_cast<size_t>(r) * local.size() + i];
    ASSERT_NEAR(averaged[i], sum / n, 1e-6 * std::max(1.0, std::fabs(sum))) << "element " << i;
  }
}

TEST(GradientReducer, AccumulationEqualsOneLargerBatch) {
  // Two micro-batches of 8 rows, all-reduced once == one batch of the same 16 rows.
  distribute::MirroredStrategy strategy(test_runtime());
  Tensor x0, y0, x1, y1;
  fill_batch(x0, y0, 8, strategy.replica_id(), 0);
  fill_batch(x1, y1, 8, strategy.replica_id(), 1);
  Tensor x({16, kFeatures}), y({16}, DType::kI32);
  std::memcpy(x.data<float>(), x0.data<float>(), x0.bytes());
  std::memcpy(x.data<float>() + x0.numel(), x1.data<float>(), x1.bytes());
  std::memcpy(y.data<int32_t>(), y0.data<int32_t>(), y0.bytes());
  std::memcpy(y.data<int32_t>() + 8, y1.data<int32_t>(), y1.bytes());

  auto run = [&](int micro_batches, const std::vector<std::pair<Tensor*, Tensor*>>& batches) {
    auto model = strategy.scope([] { return nn::mlp({{32}, kClasses}); },
                                {{kFeatures}, 4, small_buckets(true), micro_batches});
    nn::CrossEntropyLoss loss;
    model.zero_grad();
    for (auto [bx, by] : batches) {
      loss.forward(model.forward(*bx, nn::Mode::kTrain), *by);
      model.backward(loss.grad());
    }
    model.synchronize_gradients();
    return model.parameters().flat_grads().to_vector();
  };
  const auto accumulated = run(2, {{&x0, &y0}, {&x1, &y1}});
  const auto large = run(1, {{&x, &y}});
  EXPECT_LE(max_relative_difference(accumulated, large), 1e-5);
}

TEST(GradientReducer, Bf16CompressionStaysCloseAndIsExactOnRepresentableSums) {
  distribute::MirroredStrategy strategy(test_runtime());
  const int n = strategy.num_replicas_in_sync();
  // Exact case: small integers are exact in bf16, and so are their sums up to 256.
  std::vector<uint16_t> wire(100);
  for (size_t i = 0; i < wire.size(); ++i)
    wire[i] = float_to_bf16(static_cast<float>((strategy.replica_id() + 1) * static_cast<int>(i % 9)));
  strategy.communicator().allreduce(wire.data(), wire.size(), comm::DataType::kBF16, comm::ReduceOp::kSum);
  for (size_t i = 0; i < wire.size(); ++i)
    ASSERT_EQ(bf16_to_float(wire[i]), static_cast<float>(n * (n + 1) / 2 * static_cast<int>(i % 9)));
  // A real step: bf16 keeps 8 bits of mantissa, so gradients agree to about 2^-8 relative.
  distribute::ReducerOptions compressed = small_buckets(true);
  compressed.compression = distribute::GradCompression::kBf16;
  const auto exact = step_gradients(small_buckets(true), 1, 16, {{16, 0}});
  const auto lossy = step_gradients(compressed, 1, 16, {{16, 0}});
  EXPECT_LE(max_relative_difference(exact, lossy), 2e-2);
  EXPECT_GT(max_relative_difference(exact, lossy), 0.0) << "compression should change the numbers";
  // The hook runs the same way whichever thread starts the bucket.
  compressed.overlap = distribute::Overlap::kInline;
  EXPECT_EQ(step_gradients(compressed, 1, 16, {{16, 0}}), lossy);
}
