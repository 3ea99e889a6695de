#pragma once
// After a lost rank (on_failure = shrink): the training state the survivors put together
// from their snapshots (checkpoint/replica_snapshot.h), on the new world's chief.
//
//   replicated state: the last completed step is the most steps any survivor finished (a
//     rank may have completed the interrupted step's all-reduce before the failure reached
//     it, and then holds that step's update, the one every replica would have applied); the
//     lowest survivor holding that step sends its state to the chief. Survivors that hold
//     that step must hold the same bits (compared by fingerprint): when they do not, an
//     all-reduce returned success with a wrong sum on some of them (as Open MPI's HAN
//     collectives did across hosts, comm/failure/fault_tolerance.h), nothing is written and
//     the run ends (kTooFewReplicas) rather than go on from a state no replica should hold;
//   sharded optimizer state: the newest step at which every shard survives, on its owner
//     or on its keeper (distribute/shard_copies.h), each shard from one holder
//     (shard_recovery.h); a shard whose owner and keeper were both lost ends the run
//     (kTooFewReplicas) with nothing written, naming them.
#include <cstdint>
#include <optional>
#include <vector>

#include "mirrored/checkpoint/replica_snapshot.h"
#include "mirrored/comm/communicator.h"
#include "mirrored/config/config.h"
#include "mirrored/elastic/membership.h"
#include "mirrored/io/checkpoint_file.h"

namespace mirrored::elastic {

// Which survivor gives the replicated state: `steps` and `fingerprints` (of the state each
// holds) by rank, -1 steps for none. `step`: the most steps; `donor`: the lowest rank
// holding it; `disagreeing`: the ranks holding that step whose fingerprint differs from the
// donor's (empty when they agree, or when none holds state: step -1).
struct ReplicatedHolder {
  int64_t step = -1;
  int donor = -1;
  std::vector<int> disagreeing;
};
ReplicatedHolder choose_replicated_holder(const std::vector<int64_t>& steps, const std::vector<int64_t>& fingerprints);

struct RecoveredState {
  int64_t step = -1;          // the step it holds; -1: no state survived where it can be put together
  bool writes = false;        // this rank put the state together and writes it
  io::Checkpoint checkpoint;  // on the writer: the whole state of `step`, as a checkpoint; empty elsewhere
};

// Collective over the new world (`membership`: who was lost, named in errors). `snapshot`:
// this rank's state (none when the failure came before a Trainer existed); `called_in`:
// this rank is a spare that has just taken a lost rank's place and holds nothing. The
// writer is the lowest rank holding state (the chief, unless a spare took its place). No
// state when no rank holds any, or sharded state misses a survivor's copies: the newest
// checkpoint on disk is then the way on. Throws Error(kTooFewReplicas) when a shard's
// owner and keeper were both lost, naming them and checkpoint_dir(config).
RecoveredState recover_state(comm::Communicator& world, const Membership& membership,
                             const config::TrainConfig& config,
                             const std::optional<checkpoint::ReplicaSnapshot>& snapshot, bool called_in = false);

}  // namespace mirrored::elastic
