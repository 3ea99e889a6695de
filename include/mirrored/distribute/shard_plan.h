#pragma once
// Everything sharded optimizer state (ZeRO stage 1) knows, in one place: which replica owns
// which part of the flat parameter arena, and the collectives that cross shards.
//
// The plan is a pure function of (arena size, world size, sharded or not): every rank
// computes the same plan without talking to the others, a resumed checkpoint re-plans for
// its new world size with the same function, and so will a run that loses a rank. Shards
// are contiguous and balanced (sizes differ by at most one element; a boundary may split a
// parameter). Unsharded, every replica owns the whole arena and the cross-shard
// collectives reduce to what a replicated value needs (nothing, or a broadcast).
//
// Users: the gradient reducer (reduce-scatter bounds), the optimizer (the range it
// updates), gradient clipping (the norm summed over shards), the non-finite flag (agreed
// over shards) and the checkpointer (state gathered to and scattered from the chief).
#include <cstdint>
#include <vector>

#include "mirrored/comm/communicator.h"
#include "mirrored/core/tensor.h"
#include "mirrored/optim/update_ranges.h"

namespace mirrored::distribute {

class ShardPlan {
 public:
  // `numel` elements over `replicas` replicas; sharded only when asked for and replicas > 1
  // (a world of one is never sharded).
  static ShardPlan make(int64_t numel, int replicas, bool shard);
  // The same arena and setting for another world size.
  ShardPlan replan(int replicas) const { return make(numel_, replicas, requested_); }

  bool sharded() const { return sharded_; }
  int replicas() const { return replicas_; }
  int64_t numel() const { return numel_; }
  // Replica `rank`'s part of the arena: [begin, end); the whole arena when unsharded.
  optim::ArenaRange shard(int rank) const;
  // Every replica's shard size, in rank order (the counts of the variable-count
  // collectives), and its start (replicas + 1 offsets: bounds()[r] to bounds()[r + 1]).
  const std::vector<size_t>& counts() const { return counts_; }
  std::vector<int64_t> bounds() const;

  // Collectives over `comm`, whose size() is replicas(). All of them are no-ops (or
  // return their input) when unsharded, where every replica already holds the whole.
  //
  // In place: the sum over replicas of per-shard partial results (float32, on the host or
  // on the communicator's device), e.g. partial sums of squares of a gradient norm.
  void sum_over_shards(Tensor& values, comm::Communicator& comm) const;
  // In place: the maximum over replicas of a per-shard int32 flag on its device, e.g.
  // "this shard's gradients are not finite": every replica then decides alike.
  void any_over_shards(Tensor& flag, comm::Communicator& comm) const;
  // In place: every replica's updated shard of `flat` (float32) to every replica.
  void all_gather(Tensor& flat, comm::Communicator& comm) const;

  // Checkpoint state: `shard_state` holds this replica's shard (shard(rank).numel() values).
  // gather_to_chief returns the logical, unsharded tensor on rank 0 (empty elsewhere), sent
  // shard by shard so no rank holds more than the logical tensor plus one shard.
  // scatter_from_chief is the reverse: `logical` (read on rank 0 only) into every
  // replica's `shard_state`.
  std::vector<float> gather_to_chief(const Tensor& shard_state, comm::Communicator& comm) const;
  // The same into `logical` (cleared elsewhere than on rank 0): a buffer with the capacity
  // already (the last checkpoint's) is refilled without allocating.
  void gather_to_chief(const Tensor& shard_state, comm::Communicator& comm, std::vector<float>& logical) const;
  void scatter_from_chief(const std::vector<float>& logical, Tensor& shard_state, comm::Communicator& comm) const;

 private:
  int64_t numel_ = 0;
  int replicas_ = 1;
  bool requested_ = false;
  bool sharded_ = false;
  std::vector<size_t> counts_;
};

}  // namespace mirrored::distribute
