#pragma once
// After a lost replica, with sharded optimizer state: from the shard copies the survivors
// hold (distribute/shard_copies.h), the newest step at which every shard survives, who sends each
// one, and the whole state put together from them. Pure functions: every survivor
// computes the same choice from the same all-gathered labels.
#include <cstdint>
#include <vector>

#include "mirrored/distribute/shard_copies.h"
#include "mirrored/distribute/shard_plan.h"

namespace mirrored::elastic {

// One copy a survivor holds: which shard, at which step.
struct HeldPiece {
  int shard = -1;
  int64_t step = -1;
};

struct ShardHolders {
  int64_t step = -1;            // the newest step every shard has a copy of; -1: none
  std::vector<int> holder;      // per shard: the lowest survivor holding it at `step`
  std::vector<int> lost_shards; // shards with no copy at any step (empty when step >= 0)
};

// `held[i]`: the copies survivor i holds; `shards`: the world the state was cut for.
ShardHolders choose_shard_holders(const std::vector<std::vector<HeldPiece>>& held, int shards);

// The logical state, filled shard by shard: the flat parameters, then each optimizer state
// tensor's unsharded values.
class StateAssembly {
 public:
  StateAssembly(const distribute::ShardPlan& plan, int state_tensors);
  // `values`: shard `shard`'s piece (ShardPiece::values).
  void place(int shard, const std::vector<float>& values);
  // Floats in shard `shard`'s piece.
  size_t piece_floats(int shard) const;
  bool complete() const;

  const std::vector<float>& params() const { return params_; }
  const std::vector<std::vector<float>>& state() const { return state_; }

 private:
  distribute::ShardPlan plan_;
  std::vector<float> params_;
  std::vector<std::vector<float>> state_;
  std::vector<bool> placed_;
};

}  // namespace mirrored::elastic
