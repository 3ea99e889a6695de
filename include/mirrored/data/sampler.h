#pragma once
// Which samples each replica sees. Every rank computes the same seeded permutation of the
// global index list for an epoch; global batch b is entries [b*G, (b+1)*G); replica r
// takes its contiguous slice [r*B, (r+1)*B) of it (B = G / world). The last incomplete
// global batch is dropped, so every replica runs the same number of steps.
#include <cstdint>
#include <span>
#include <vector>

namespace mirrored::data {

// A seeded Fisher-Yates permutation of 0..n-1, a function of (seed, epoch) alone.
std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch);

class ShardedSampler {
 public:
  // Throws InputError when global_batch does not divide by world or exceeds the dataset.
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
  int rank_, world_;
  uint64_t seed_;
  bool shuffle_;
  std::vector<int64_t> order_;
};

// Evaluation: each rank takes a contiguous range so that every sample is covered exactly
// once across ranks (ranges differ by at most one sample).
struct IndexRange {
  int64_t begin = 0;
  int64_t end = 0;
};
IndexRange eval_shard(int64_t dataset_size, int rank, int world);

}  // namespace mirrored::data
