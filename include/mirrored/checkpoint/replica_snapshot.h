#pragma once
// What one replica holds after a step, taken without any collective (train::Trainer::snapshot):
// the run's position and its training state, whole or in shards. The recovery after a lost
// rank puts the survivors' snapshots together into the checkpoint the run goes on from
// (elastic/state_recovery.h); anything else that needs the state of a step without stopping
// the others (a checkpoint written in the background, a replacement rank receiving the
// state from its peers) takes the same snapshot.
//
//   position      checkpoint.step, .epoch, .step_in_epoch, .steps_per_epoch: the data order
//                 is a function of (seed, epoch), so the step count is the whole position
//   parameters    checkpoint.params and .buffers (batch norm running statistics)
//   optimizer     replicated (shards == 0): checkpoint.optimizer_state, every tensor whole,
//                 and checkpoint.optimizer_steps;
//                 sharded (shards > 0): checkpoint.optimizer_state names the tensors (values
//                 empty), and `pieces` hold this replica's shard and the copies it keeps for
//                 others (distribute/shard_copies.h), each labelled with its step
//   run           checkpoint.config, .optimizer, .world_size: as in any checkpoint
#include <cstdint>
#include <vector>

#include "mirrored/distribute/shard_copies.h"
#include "mirrored/io/checkpoint_file.h"

namespace mirrored::checkpoint {

struct ReplicaSnapshot {
  io::Checkpoint checkpoint;
  int shards = 0;                              // sharded: the world the state was cut for
  int keeper_distance = 0;                     // sharded: rank r's copy is on rank r + this
  std::vector<distribute::ShardPiece> pieces;  // sharded: the copies this replica holds

  bool sharded() const { return shards > 0; }
  int64_t step() const { return checkpoint.step; }
};

}  // namespace mirrored::checkpoint
