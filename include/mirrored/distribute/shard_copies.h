#pragma once
// on_failure = shrink with sharded optimizer state (optimizer.shard): each replica's shard
// of the training state, its slice of the parameters and of every optimizer state tensor,
// also lives on one other replica, its keeper, kept current every step. A lost replica's
// shard survives on its keeper, and the survivors rebuild the whole state of the newest
// step they all can (elastic/state_recovery.h) instead of going back to a checkpoint.
//
// What each replica holds, every copy labelled with the step it belongs to:
//   its own shard, live (the optimizer updates it in place);
//   its own shard as it was before this step's update: a failure during the all-gather or
//     the exchange after the update can leave other shards a step behind, and this copy is
//     then the one that matches them;
//   its ward's shard (the replica whose keeper it is), as of the last exchange.
// Any one lost replica leaves every shard at some common step on the survivors. Losing a
// replica together with its keeper loses that shard: the run then ends (recovery says
// which ranks held it) and the newest checkpoint is the way on.
//
// The exchange runs in the background: started at the end of a step, it completes before
// the next update (keep_previous), so it overlaps the next step's forward and backward. A
// failure meanwhile leaves the ward's copy one step behind the live shards; the previous
// copies are at that same step (they are taken only after the exchange completes), so every
// shard still survives at one common step, and the recovery redoes one more step.
//
// Keepers form a rotation: rank r's keeper is (r + d) mod world, d the smallest distance
// that puts every keeper on another host when the ranks span several hosts, else 1. Cost:
// one exchange per step of (1 + state tensors) x shard floats with two neighbours, and
// host memory for three copies of the shard (on GPUs also a copy of each to the host).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mirrored/comm/communicator.h"
#include "mirrored/core/tensor.h"
#include "mirrored/distribute/shard_plan.h"

namespace mirrored::distribute {

struct ShardPiece {
  int shard = -1;               // the rank that owns it, in the world the plan was cut for
  int64_t step = -1;            // steps done when it was taken
  int64_t optimizer_steps = 0;  // updates applied by then (bias corrections count them)
  std::vector<float> values;    // the parameter slice, then each optimizer state tensor's slice
};

// Floats in shard `shard`'s piece: its parameter slice and one slice per state tensor.
inline size_t shard_piece_floats(const ShardPlan& plan, int shard, size_t state_tensors) {
  return static_cast<size_t>(plan.shard(shard).numel()) * (1 + state_tensors);
}

class ShardCopies {
 public:
  // The rotation's distance, alike on every rank: `hosts` in rank order.
  static int keeper_distance(const std::vector<std::string>& hosts);

  // `comm`: the plan's world (its rank is this replica's), with point-to-point exchanges
  // (MPI's: on GPUs the shard goes through host memory). `state`: the optimizer's state
  // tensors, each holding this rank's shard, on the parameters' device. The own shard is
  // taken as being at `steps_done`. Call exchange() before the
  // first step, so the ward's copy exists from the start.
  ShardCopies(const ShardPlan& plan, comm::Communicator& comm, int distance, const Tensor& flat_params,
              std::vector<const Tensor*> state, int64_t steps_done, int64_t optimizer_steps);

  // Completes the exchange in flight (waits for it) before `previous` and `outgoing` change.
  ~ShardCopies();
  ShardCopies(const ShardCopies&) = delete;
  ShardCopies& operator=(const ShardCopies&) = delete;

  // Just before an update: completes the exchange in flight, then keeps the own shard as
  // it is, at `steps_done` steps.
  void keep_previous(int64_t steps_done, int64_t optimizer_steps);
  // Just after it: the own shard now holds `steps_done` steps.
  void updated(int64_t steps_done, int64_t optimizer_steps);
  // Collective over the plan's world, at the end of a step: starts sending the own shard
  // to the keeper and receiving the ward's from the ward (complete_exchange() ends it).
  // `optimizer_steps`: the updates counted once the step is settled (a skipped update no
  // longer counts).
  void exchange(int64_t optimizer_steps);
  // Waits for the exchange in flight, if any; the ward's copy is then the one it brought.
  void complete_exchange();
  // After a failure, before pieces(): the exchange in flight completes (its communicator
  // is revoked, so it returns at once) or is given up; the ward's copy is then the newest
  // that arrived whole.
  void settle_after_failure();

  int distance() const { return distance_; }
  // Seconds the calling thread has spent in keep_previous() and exchange() so far: packing
  // the shard, starting an exchange and waiting for the one in flight. The copies' cost in
  // the step (the transfer itself runs during the forward and backward unless waited for).
  double seconds_in_step() const { return seconds_in_step_; }
  // Floats sent (and received) by one exchange.
  size_t floats_per_exchange() const { return shard_piece_floats(plan_, rank_, state_.size()); }
  // Every copy this rank holds: its own shard, its previous one and its ward's (the last
  // two once taken).
  std::vector<ShardPiece> pieces() const;

 private:
  void pack_own(std::vector<float>& out) const;

  ShardPlan plan_;
  comm::Communicator& comm_;
  int rank_;
  int distance_;
  int keeper_;
  int ward_;
  const Tensor& flat_params_;
  std::vector<const Tensor*> state_;
  int64_t own_step_, own_optimizer_steps_;
  ShardPiece previous_, ward_copy_;
  std::vector<float> outgoing_, incoming_;
  int64_t outgoing_step_ = -1;  // the step outgoing_ was packed at (the own shard's, until it updates)
  std::unique_ptr<comm::Work> in_flight_;  // the exchange under way: outgoing_ and incoming_ are MPI's
  int64_t in_flight_step_ = -1, in_flight_optimizer_steps_ = 0;
  mutable Tensor staging_;      // GPU state: a host slice on its way into a piece
  double seconds_in_step_ = 0.0;
};

}  // namespace mirrored::distribute
