#pragma once
// Which samples of every global batch each replica computes, and in which groups: the one
// place the data partition is decided (the datasets read their share from it, the model
// its groups).
//
// The global batch is cut into `groups` equal groups of consecutive samples; rank r
// computes a contiguous run of groups (data::balanced_share: the first groups % world
// ranks hold one more). Like the shard plan, it is a pure function of its arguments, so
// every rank computes the same plan alone, and a resumed run re-plans for its world size.
//
//  - reduction = fast: one group per replica (the global batch must divide by the world,
//    unless uneven shares are allowed: then one group per sample, so shares differ by at
//    most one); a replica computes its whole share in one pass, and gradients are
//    all-reduced, each replica's weighted by its share (share_weight()).
//  - reduction = invariant: `reduction.shards` groups ("virtual replicas") whatever the
//    world size; a replica computes each of its groups in its own pass, with the same
//    shapes at any world size, and the per-group gradients are summed exactly
//    (comm/exact_sum.h). So parameters, losses and evaluations are the same bits at every
//    world size from 1 to the number of groups.
#include <cstdint>
#include <string>

#include "mirrored/data/sampler.h"

namespace mirrored::distribute {

enum class Reduction { kFast, kInvariant };
const char* reduction_name(Reduction mode);  // "fast", "invariant"

struct ReductionOptions {
  Reduction mode = Reduction::kFast;
  int64_t shards = 0;  // invariant: virtual replicas per global batch; 0 picks a default
  // fast: a world that does not divide the global batch gets shares differing by one
  // sample instead of an error (the survivors of a shrink; a fresh start keeps the check).
  bool uneven_shares = false;
};

// The default number of virtual replicas for a global batch: its largest divisor of at most
// 8, or, for a larger world, its smallest divisor of at least the world size (so the run
// can start). 8 keeps each group's matrix products large enough to run near the speed of
// one whole-share product on a few ranks, and lets a run go on at any size up to 8.
int64_t default_virtual_replicas(int64_t global_batch, int world);

class BatchPlan {
 public:
  // The plan for `world` replicas. InputError (usage) naming the key: a non-positive batch;
  // fast: a batch that does not divide by the world (unless uneven_shares); invariant:
  // shards that do not divide the batch, or fewer shards than ranks.
  static BatchPlan make(int64_t global_batch, int world, const ReductionOptions& reduction);
  // The same batch and groups over another world size (a resume or a shrunk world); in
  // fast mode with a world that does not divide the batch, one group per sample, so the
  // shares differ by at most one sample.
  BatchPlan replan(int world) const;

  Reduction mode() const { return mode_; }
  int64_t global_batch() const { return global_batch_; }
  int64_t groups() const { return groups_; }
  int world() const { return world_; }
  int64_t group_size() const { return global_batch_ / groups_; }
  // Rank `rank`'s groups [begin, end) and its samples of every global batch.
  data::IndexRange groups_of(int rank) const;
  data::IndexRange samples_of(int rank) const;
  // Fast mode: what rank `rank`'s mean gradient and loss are multiplied by so that the mean
  // over replicas is the mean over the global batch: world x its share / global batch
  // (exactly 1 when the shares are even). Invariant mode: 1 (its sums are exact).
  float share_weight(int rank) const;
  // What a user reads at start-up: "8 virtual replicas of 4 samples, 2 or 3 per rank".
  std::string describe() const;

 private:
  BatchPlan(Reduction mode, int64_t global_batch, int64_t groups, int world)
      : mode_(mode), global_batch_(global_batch), groups_(groups), world_(world) {}

  Reduction mode_;
  int64_t global_batch_, groups_;
  int world_;
};

}  // namespace mirrored::distribute
