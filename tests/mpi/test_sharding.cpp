// Sharded optimizer state (ZeRO stage 1) across real ranks: the variable-count collectives
// with exact answers (rank-filled buffers, sizes that do not divide), the sharded reducer
// against the all-reducing one, and sharded training steps against unsharded ones.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "mirrored/comm/communicator.h"
#include "mirrored/distribute/shard_copies.h"
#include "mirrored/distribute/strategy.h"
#include "mirrored/elastic/shard_recovery.h"
#include "mirrored/nn/builders.h"
#include "mirrored/nn/loss.h"
#include "mirrored/optim/optimizer.h"
#include "mpi_env.h"
#include "relative_difference.h"

using namespace mirrored;
using comm::DataType;
using comm::ReduceOp;

namespace {
comm::Communicator& world() { return test_runtime().world(); }

// Counts that do not divide evenly: rank r owns 2r + 3 elements.
std::vector<size_t> uneven_counts(int ranks) {
  std::vector<size_t> counts;
  for (int r = 0; r < ranks; ++r) counts.push_back(static_cast<size_t>(2 * r + 3));
  return counts;
}

size_t offset_of(const std::vector<size_t>& counts, int rank) {
  size_t offset = 0;
  for (int r = 0; r < rank; ++r) offset += counts[static_cast<size_t>(r)];
  return offset;
}

void check_reduce_scatter(const std::vector<size_t>& counts, bool async) {
  const int n = world().size(), r = world().rank();
  size_t total = 0;
  for (size_t c : counts) total += c;
  std::vector<float> send(total);
  for (size_t i = 0; i < total; ++i) send[i] = static_cast<float>(r + 1) * static_cast<float>(i);
  const size_t mine = counts[static_cast<size_t>(r)];
  std::vector<float> recv(mine + 1, -7.0f);  // one guard element past the piece
  if (async) {
    auto work = world().reduce_scatter_async(send.data(), recv.data(), counts, DataType::kF32, ReduceOp::kMean);
    work->wait();
  } else {
    world().reduce_scatter(send.data(), recv.data(), counts, DataType::kF32, ReduceOp::kSum);
  }
  const float ranks_sum = static_cast<float>(n * (n + 1) / 2);
  const size_t offset = offset_of(counts, r);
  for (size_t i = 0; i < mine; ++i) {
    const float sum = ranks_sum * static_cast<float>(offset + i);
    ASSERT_EQ(recv[i], async ? sum * (1.0f / static_cast<float>(n)) : sum) << "element " << i;
  }
  EXPECT_EQ(recv[mine], -7.0f) << "written past the piece";
}
}  // namespace

TEST(ShardedOptimizer, ReduceScatterUnevenCountsExact) { check_reduce_scatter(uneven_counts(world().size()), false); }
TEST(ShardedOptimizer, ReduceScatterAsyncMeanExact) { check_reduce_scatter(uneven_counts(world().size()), true); }
TEST(ShardedOptimizer, ReduceScatterBlockExact) {
  check_reduce_scatter(std::vector<size_t>(static_cast<size_t>(world().size()), 7), false);
}
TEST(ShardedOptimizer, ReduceScatterWithEmptyPieces) {
  std::vector<size_t> counts(static_cast<size_t>(world().size()), 0);
  counts.back() = 5;
  check_reduce_scatter(counts, true);
}

TEST(ShardedOptimizer, ReduceScatterInPlaceLeavesThePieceAtItsOffset) {
  const int n = world().size(), r = world().rank();
  for (const auto& counts : {uneven_counts(n), std::vector<size_t>(static_cast<size_t>(n), 6)}) {
    size_t total = 0;
    for (size_t c : counts) total += c;
    std::vector<float> buffer(total);
    for (size_t i = 0; i < total; ++i) buffer[i] = static_cast<float>(r + 1) * static_cast<float>(i);
    world().reduce_scatter_inplace_async(buffer.data(), counts, DataType::kF32, ReduceOp::kMean)->wait();
    const float ranks_sum = static_cast<float>(n * (n + 1) / 2);
    const size_t offset = offset_of(counts, r);
    for (size_t i = 0; i < counts[static_cast<size_t>(r)]; ++i)
      ASSERT_EQ(buffer[offset + i], ranks_sum * static_cast<float>(offset + i) * (1.0f / static_cast<float>(n)))
          << "element " << i;
  }
}

TEST(ShardedOptimizer, AllgatherInPlaceUnevenAndEven) {
  const int n = world().size(), r = world().rank();
  for (const auto& counts : {uneven_counts(n), std::vector<size_t>(static_cast<size_t>(n), 4)}) {
    size_t total = 0;
    for (size_t c : counts) total += c;
    std::vector<int32_t> buffer(total, -1);
    const size_t offset = offset_of(counts, r);
    for (size_t i = 0; i < counts[static_cast<size_t>(r)]; ++i) buffer[offset + i] = 1000 * r + static_cast<int>(i);
    world().allgather_inplace_async(buffer.data(), counts, DataType::kI32)->wait();
    for (int src = 0; src < n; ++src)
      for (size_t i = 0; i < counts[static_cast<size_t>(src)]; ++i)
        ASSERT_EQ(buffer[offset_of(counts, src) + i], 1000 * src + static_cast<int>(i)) << "rank " << src;
  }
}

namespace {
constexpr int64_t kFeatures = 12, kClasses = 5, kRows = 6;

void fill_batch(Tensor& x, Tensor& y, int rank, int step) {
  ensure_shape(x, {kRows, kFeatures});
  ensure_shape(y, {kRows}, DType::kI32);
  Rng rng(99, static_cast<uint64_t>(rank * 1000 + step));
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = rng.uniform(-1.0f, 1.0f);
  for (int64_t i = 0; i < kRows; ++i) y.data<int32_t>()[i] = static_cast<int32_t>(rng.below(kClasses));
}

distribute::ReducerOptions reducer(bool shard, distribute::Overlap overlap) {
  distribute::ReducerOptions options;
  options.caps = {1, 1024};  // several buckets, so shard boundaries fall inside buckets
  options.overlap = overlap;
  options.shard = shard;
  return options;
}

struct Trained {
  std::vector<float> params;
  std::vector<float> owned_grads;  // the last step's averaged gradient in the owned range
  optim::ArenaRange owned;
  int64_t state_bytes = 0;
};

// `steps` steps of an mlp with `kind` (0 sgd+momentum, 1 adam, 2 adamw), with weight decay.
Trained train(bool shard, int kind, int steps, distribute::Overlap overlap = distribute::Overlap::kOff,
              int accumulate = 1) {
  distribute::MirroredStrategy strategy(test_runtime());
  auto model = strategy.scope([] { return nn::mlp({{24, 16}, kClasses}); },
                              {{kFeatures}, 5, reducer(shard, overlap), accumulate});
  std::unique_ptr<optim::Optimizer> optimizer;
  const auto range = model.shard();
  if (kind == 0) {
    optimizer = std::make_unique<optim::Sgd>(model.parameters(),
                                             kernels::SgdHyper{.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f},
                                             range);
  } else {
    optimizer = std::make_unique<optim::Adam>(
        model.parameters(),
        kernels::AdamHyper{.lr = 0.01f, .weight_decay = 0.1f, .decoupled_weight_decay = kind == 2}, range);
  }
  nn::CrossEntropyLoss loss;
  Tensor x, y;
  Trained out;
  for (int step = 0; step < steps; ++step) {
    model.zero_grad();
    for (int micro = 0; micro < accumulate; ++micro) {
      fill_batch(x, y, strategy.replica_id(), step * accumulate + micro);
      loss.forward(model.forward(x, nn::Mode::kTrain), y);
      model.backward(loss.grad());
    }
    model.synchronize_gradients();
    optimizer->step();
    model.gather_parameters();
  }
  out.params = model.parameters().flat_params().to_vector();
  out.owned = model.shard();
  const auto grads = model.parameters().flat_grads().to_vector();
  out.owned_grads.assign(grads.begin() + out.owned.begin, grads.begin() + out.owned.end);
  out.state_bytes = optimizer->state_bytes();
  return out;
}

// This replica's gradients of batch 0, before they are reduced.
void backward_one_batch(distribute::MirroredStrategy& strategy, distribute::DistributedModel& model) {
  nn::CrossEntropyLoss loss;
  Tensor x, y;
  fill_batch(x, y, strategy.replica_id(), 0);
  model.zero_grad();
  loss.forward(model.forward(x, nn::Mode::kTrain), y);
  model.backward(loss.grad());
}
}  // namespace

TEST(ShardedOptimizer, ShardedStepsMatchUnshardedForEveryOptimizer) {
  for (int kind = 0; kind < 3; ++kind) {
    const Trained plain = train(false, kind, 4), sharded = train(true, kind, 4);
    ASSERT_EQ(plain.params.size(), sharded.params.size());
    // Only the summation order differs (reduce-scatter against all-reduce).
    EXPECT_LT(max_relative_difference(plain.params, sharded.params), 1e-5) << "optimizer kind " << kind;
    // The owned range's averaged gradient is the all-reduced one.
    std::vector<float> expected(plain.owned_grads.begin() + sharded.owned.begin,
                                plain.owned_grads.begin() + sharded.owned.end);
    EXPECT_LT(max_relative_difference(expected, sharded.owned_grads), 1e-5);
  }
}

TEST(ShardedOptimizer, SameSettingsTwiceAreBitIdentical) {
  EXPECT_EQ(train(true, 2, 3).params, train(true, 2, 3).params);
  // Every overlap mode issues the same reduce-scatters: bit-identical too.
  EXPECT_EQ(train(true, 1, 3, distribute::Overlap::kOff).params,
            train(true, 1, 3, distribute::Overlap::kThread).params);
  EXPECT_EQ(train(true, 1, 3, distribute::Overlap::kOff).params,
            train(true, 1, 3, distribute::Overlap::kInline).params);
}

TEST(ShardedOptimizer, ReplicasHoldTheSameParametersAfterTheGather) {
  const Trained sharded = train(true, 1, 2);
  std::vector<float> chief = sharded.params;
  world().broadcast(chief.data(), chief.size(), 0);
  EXPECT_EQ(chief, sharded.params);
}

TEST(ShardedOptimizer, AccumulationKeepsWorking) {
  const Trained plain = train(false, 1, 2, distribute::Overlap::kOff, 3),
                sharded = train(true, 1, 2, distribute::Overlap::kOff, 3);
  EXPECT_LT(max_relative_difference(plain.params, sharded.params), 1e-5);
}

TEST(ShardedOptimizer, EachReplicaHoldsItsShareOfTheOptimizerState) {
  const int n = world().size();
  const Trained plain = train(false, 1, 1), sharded = train(true, 1, 1);
  const auto numel = static_cast<int64_t>(plain.params.size());
  EXPECT_EQ(plain.state_bytes, 2 * numel * 4);
  // Balanced shards: numel / n rounded either way, two moments of 4 bytes each.
  EXPECT_GE(sharded.state_bytes, 2 * (numel / n) * 4);
  EXPECT_LE(sharded.state_bytes, 2 * (numel / n + 1) * 4);
  const auto all = world().allgather_value<int64_t>(sharded.state_bytes);
  int64_t total = 0;
  for (const int64_t bytes : all) total += bytes;
  EXPECT_EQ(total, plain.state_bytes) << "the shards partition the state";
}

TEST(ShardedOptimizer, NonFiniteGradientsAreFlaggedOnEveryReplica) {
  if (world().size() < 2) GTEST_SKIP() << "needs two ranks";
  distribute::MirroredStrategy strategy(test_runtime());
  auto model = strategy.scope([] { return nn::mlp({{24, 16}, kClasses}); },
                              {{kFeatures}, 5, reducer(true, distribute::Overlap::kOff), 1});
  backward_one_batch(strategy, model);
  // The last rank's gradient goes bad in the part the chief owns.
  if (strategy.replica_id() == world().size() - 1)
    model.parameters().flat_grads().data<float>()[0] = std::numeric_limits<float>::infinity();
  model.synchronize_gradients();
  // Every replica's flag says so, though only the chief's shard holds the Inf; nothing is
  // written into the gradients.
  Tensor flag({1}, DType::kI32);
  model.flag_non_finite(flag);
  EXPECT_EQ(flag.data<int32_t>()[0], 1) << "rank " << strategy.replica_id();
  const auto owned = model.shard();
  Tensor mine = model.parameters().flat_grads().view(owned.begin, {owned.numel()});
  EXPECT_EQ(kernels::all_finite(mine), strategy.replica_id() != 0) << "rank " << strategy.replica_id();
}

// The gradient-clipping seam: a global norm formed from each replica's owned range and one
// sum over shards is the norm of the all-reduced gradients.
TEST(ShardedOptimizer, NormFromShardsEqualsTheWholeNorm) {
  double norms[2] = {0, 0};
  for (const bool shard : {false, true}) {
    distribute::MirroredStrategy strategy(test_runtime());
    auto model = strategy.scope([] { return nn::mlp({{24, 16}, kClasses}); },
                                {{kFeatures}, 5, reducer(shard, distribute::Overlap::kOff), 1});
    backward_one_batch(strategy, model);
    model.synchronize_gradients();
    EXPECT_EQ(model.shard_plan().sharded(), shard && world().size() > 1);
    const auto owned = model.shard();
    const auto grads = model.parameters().flat_grads().to_vector();
    float squares = 0.0f;
    for (int64_t i = owned.begin; i < owned.end; ++i) {
      const float g = grads[static_cast<size_t>(i)];
      squares += g * g;
    }
    Tensor total = Tensor::from({squares}, {1});
    model.shard_plan().sum_over_shards(total, model.shard_communicator());
    norms[shard ? 1 : 0] = std::sqrt(static_cast<double>(total.to_vector()[0]));
  }
  EXPECT_GT(norms[0], 0.0);
  EXPECT_NEAR(norms[1], norms[0], 1e-5 * norms[0]);
}

// The keepers' exchange: rank r sends to r + d and receives from r - d, uneven counts,
// exact values.
TEST(ShardCopies, SendrecvAlongARotationExact) {
  const int n = world().size(), r = world().rank();
  for (int distance = 1; distance < n; ++distance) {
    const int dest = (r + distance) % n, source = (r - distance + n) % n;
    std::vector<float> send(static_cast<size_t>(2 * r + 3));
    for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<float>(1000 * r + static_cast<int>(i));
    std::vector<float> recv(static_cast<size_t>(2 * source + 3) + 1, -7.0f);
    world().sendrecv(send.data(), send.size(), dest, recv.data(), recv.size() - 1, source, DataType::kF32);
    for (size_t i = 0; i + 1 < recv.size(); ++i)
      ASSERT_EQ(recv[i], static_cast<float>(1000 * source + static_cast<int>(i))) << "distance " << distance;
    EXPECT_EQ(recv.back(), -7.0f) << "written past the piece";
  }
}

// Every rank's live shard, its previous one and its ward's copy, gathered as a recovery
// would: any one rank's pieces left out, the others still rebuild the whole state, equal
// to the state the ranks hold.
TEST(ShardCopies, AnyOneLostRankLeavesTheWholeStateOnTheOthers) {
  const int n = world().size(), r = world().rank();
  const int64_t numel = 37;
  const auto plan = distribute::ShardPlan::make(numel, n, true);
  const optim::ArenaRange mine = plan.shard(r);
  Tensor params({numel});
  Tensor m({mine.numel()}), v({mine.numel()});
  const auto fill = [&](int64_t step) {
    for (int64_t i = 0; i < numel; ++i) params.data<float>()[i] = static_cast<float>(step * 1000 + i);
    for (int64_t i = 0; i < mine.numel(); ++i) {
      m.data<float>()[i] = static_cast<float>(step * 1000 + 100 + mine.begin + i);
      v.data<float>()[i] = static_cast<float>(step * 1000 + 200 + mine.begin + i);
    }
  };
  fill(4);
  distribute::ShardCopies copies(plan, world(), 1, params, {&m, &v}, 4, 4);
  copies.exchange(4);
  copies.keep_previous(4, 4);
  fill(5);  // the update of step 5
  copies.updated(5, 5);
  copies.exchange(5);
  // What the recovery would choose with each rank lost in turn, from every rank's pieces.
  const auto choices = [&](const std::vector<distribute::ShardPiece>& held_here) {
    std::vector<int64_t> labels;
    for (const auto& piece : held_here) labels.insert(labels.end(), {piece.shard, piece.step});
    std::vector<int64_t> all(labels.size() * static_cast<size_t>(n));
    world().allgather(labels.data(), all.data(), labels.size(), DataType::kI64);
    std::vector<elastic::ShardHolders> chosen;
    for (int lost = 0; lost < n; ++lost) {
      std::vector<std::vector<elastic::HeldPiece>> held;
      for (int s = 0; s < n; ++s) {
        if (s == lost) continue;
        held.emplace_back();
        for (size_t i = 0; i < held_here.size(); ++i)
          held.back().push_back({static_cast<int>(all[static_cast<size_t>(s) * labels.size() + 2 * i]),
                                 all[static_cast<size_t>(s) * labels.size() + 2 * i + 1]});
      }
      chosen.push_back(elastic::choose_shard_holders(held, n));
    }
    return chosen;
  };
  // A failure while that exchange is in flight: the ward's copy is still step 4's, as are
  // the previous copies, so every shard survives at step 4 (one step redone).
  const std::vector<distribute::ShardPiece> in_flight = copies.pieces();
  ASSERT_EQ(in_flight.size(), 3u);
  EXPECT_EQ(in_flight[1].step, 4);
  EXPECT_EQ(in_flight[2].step, 4);
  for (const auto& choice : choices(in_flight)) EXPECT_EQ(choice.step, 4);
  copies.complete_exchange();
  const std::vector<distribute::ShardPiece> pieces = copies.pieces();
  ASSERT_EQ(pieces.size(), 3u);  // own at 5, previous at 4, the ward's at 5
  EXPECT_EQ(pieces[2].shard, (r - 1 + n) % n);

  // Each lost rank in turn: the survivors rebuild step 5's whole state.
  const std::vector<elastic::ShardHolders> chosen = choices(pieces);
  for (int lost = 0; lost < n; ++lost) {
    const elastic::ShardHolders& choice = chosen[static_cast<size_t>(lost)];
    ASSERT_EQ(choice.step, 5) << "rank " << lost << " lost";
    // The survivors' own ranks, in order, as the holders' indices name them.
    std::vector<int> survivors;
    for (int s = 0; s < n; ++s)
      if (s != lost) survivors.push_back(s);
    elastic::StateAssembly assembly(plan, 2);
    for (int shard = 0; shard < n; ++shard) {
      const int holder = survivors[static_cast<size_t>(choice.holder[static_cast<size_t>(shard)])];
      std::vector<float> values(assembly.piece_floats(shard));
      if (r == holder)
        for (const auto& piece : pieces)
          if (piece.shard == shard && piece.step == 5) values = piece.values;
      world().broadcast(values.data(), values.size(), holder);
      assembly.place(shard, values);
    }
    ASSERT_TRUE(assembly.complete());
    for (int64_t i = 0; i < numel; ++i) {
      ASSERT_EQ(assembly.params()[static_cast<size_t>(i)], static_cast<float>(5000 + i)) << "rank " << lost << " lost";
      ASSERT_EQ(assembly.state()[0][static_cast<size_t>(i)], static_cast<float>(5100 + i));
      ASSERT_EQ(assembly.state()[1][static_cast<size_t>(i)], static_cast<float>(5200 + i));
    }
  }
}
