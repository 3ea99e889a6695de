#include "mirrored/data/sampler.h"

#include <algorithm>
#include <numeric>

#include "mirrored/core/error.h"
#include "mirrored/core/rng.h"

namespace mirrored::data {
namespace {

// Data order has its own Rng streams, one per epoch, apart from weight initialisation's.
constexpr uint64_t kFirstEpochStream = 1000;

}  // namespace

std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch) {
  MIRRORED_CHECK(n >= 0 && epoch >= 0, "epoch_permutation(", n, ", seed, ", epoch, ")");
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  Rng rng(seed, kFirstEpochStream + static_cast<uint64_t>(epoch));
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i) + 1));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

IndexRange balanced_share(int64_t units, int rank, int world) {
  MIRRORED_CHECK(units >= 0 && world >= 1 && rank >= 0 && rank < world, "balanced_share(", units, ", ", rank,
                 ", ", world, ")");
  const int64_t base = units / world;
  const int64_t extra = units % world;
  IndexRange range;
  range.begin = rank * base + std::min<int64_t>(rank, extra);
  range.end = range.begin + base + (rank < extra ? 1 : 0);
  return range;
}

IndexRange even_share(int64_t global_batch, int rank, int world) {
  MIRRORED_CHECK(world >= 1 && rank >= 0 && rank < world, "rank ", rank, " of world ", world);
  if (global_batch <= 0)
    throw InputError(str_cat("batch_size (global) must be positive, got ", global_batch), ExitCode::kUsage);
  if (global_batch % world != 0)
    throw InputError(str_cat("batch_size (global) ", global_batch, " does not divide evenly over ", world,
                             " replicas: choose a multiple of ", world),
                     ExitCode::kUsage);
  const int64_t per_replica = global_batch / world;
  return IndexRange{rank * per_replica, (rank + 1) * per_replica};
}

ShardedSampler::ShardedSampler(int64_t dataset_size, int64_t global_batch, IndexRange share, uint64_t seed,
                               bool shuffle)
    : size_(dataset_size),
      global_batch_(global_batch),
      per_replica_batch_(share.size()),
      steps_per_epoch_(0),
      share_(share),
      seed_(seed),
      shuffle_(shuffle) {
  if (global_batch <= 0)
    throw InputError(str_cat("batch_size (global) must be positive, got ", global_batch), ExitCode::kUsage);
  MIRRORED_CHECK(share.begin >= 0 && share.begin <= share.end && share.end <= global_batch, "share [", share.begin,
                 ", ", share.end, ") of a global batch of ", global_batch);
  if (global_batch > dataset_size) {
    throw InputError(str_cat("batch_size (global) ", global_batch, " is too large: the dataset has only ",
                             dataset_size, " samples, fewer than one global batch of ", global_batch),
                     ExitCode::kUsage);
  }
  // The incomplete last batch is dropped so every replica runs the same number of steps.
  steps_per_epoch_ = dataset_size / global_batch;
  set_epoch(0);
}

ShardedSampler::ShardedSampler(int64_t dataset_size, int64_t global_batch, int rank, int world, uint64_t seed,
                               bool shuffle)
    : ShardedSampler(dataset_size, global_batch, even_share(global_batch, rank, world), seed, shuffle) {}

void ShardedSampler::set_epoch(int64_t epoch) {
  if (shuffle_) {
    order_ = epoch_permutation(size_, seed_, epoch);
  } else if (static_cast<int64_t>(order_.size()) != size_) {
    order_.resize(static_cast<size_t>(size_));
    std::iota(order_.begin(), order_.end(), int64_t{0});
  }
}

std::span<const int64_t> ShardedSampler::replica_indices(int64_t step) const {
  MIRRORED_CHECK(step >= 0 && step < steps_per_epoch_, "step ", step, " of an epoch with ",
                 steps_per_epoch_, " steps");
  const int64_t first = step * global_batch_ + share_.begin;
  return std::span<const int64_t>(order_).subspan(static_cast<size_t>(first),
                                                  static_cast<size_t>(per_replica_batch_));
}

IndexRange eval_shard(int64_t dataset_size, int64_t batch, int rank, int world) {
  MIRRORED_CHECK(dataset_size >= 0 && batch >= 1, "eval_shard(", dataset_size, ", batch ", batch, ")");
  const IndexRange batches = balanced_share((dataset_size + batch - 1) / batch, rank, world);
  return IndexRange{std::min(batches.begin * batch, dataset_size), std::min(batches.end * batch, dataset_size)};
}

}  // namespace mirrored::data
