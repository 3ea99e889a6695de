#pragma once
// Which samples each replica sees. Every rank computes the same seeded permutation of the
// global index list for an epoch; global batch b is entries [b*G, (b+1)*G); a replica
// takes its contiguous share of it: [r*B, (r+1)*B) (B = G / world) when the world divides
// the batch evenly, or the share a batch plan gives it (distribute/batch_plan.h). The last
// incomplete global batch is dropped, so every replica runs the same number of steps.
#include <cstdint>
#include <span>
#include <vector>

namespace mirrored::data {

// A seeded Fisher-Yates permutation of 0..n-1, a function of (seed, epoch) alone.
std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch);

// [begin, end) of a sequence of samples, batches or groups.
struct IndexRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// `units` split over `world` ranks in contiguous runs, the first (units % world) ranks
// taking one more: rank `rank`'s run.
IndexRange balanced_share(int64_t units, int rank, int world);

// Replica `rank`'s share [r*B, (r+1)*B) of a global batch split evenly over `world`. Throws
// InputError (usage) when the batch is not positive or does not divide by the world.
IndexRange even_share(int64_t global_batch, int rank, int world);

class ShardedSampler {
 public:
  // This replica takes positions `share` of every global batch. Throws InputError when
  // global_batch is not positive or exceeds the dataset.
  ShardedSampler(int64_t dataset_size, int64_t global_batch, IndexRange share, uint64_t seed, bool shuffle = true);
  // The even share of replica `rank` (even_share's errors).
  ShardedSampler(int64_t dataset_size, int64_t global_batch, int rank, int world, uint64_t seed,
                 bool shuffle = true);

  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  int64_t per_replica_batch() const { return per_replica_batch_; }
  int64_t global_batch() const { return global_batch_; }

  void set_epoch(int64_t epoch);  // computes that epoch's order
  // This replica's sample indices for step `step` of the current epoch.
  std::span<const int64_t> replica_indices(int64_t step) const;

 private:
  int64_t size_, global_batch_, per_replica_batch_, steps_per_epoch_;
  IndexRange share_;
  uint64_t seed_;
  bool shuffle_;
  std::vector<int64_t> order_;
};

// Evaluation: each rank takes a contiguous run of whole batches of `batch` samples (the last
// batch of the set may be partial), so every sample is covered exactly once across ranks
// and every batch holds the same samples whatever the world size (ranges differ by at most
// one batch).
IndexRange eval_shard(int64_t dataset_size, int64_t batch, int rank, int world);

}  // namespace mirrored::data
