#pragma once
// ranks.jsonl in the run directory: where each rank of the current world runs, so that a
// user (or `mirrored ps RUN_DIR`) finds a rank's process without searching every node.
// One line per rank, in rank order:
//   {"rank": 0, "host": "node-a", "pid": 4711, "agent_pid": 4705, "world_size": 4, "step": 0,
//    "run_state_dir": "/tmp/.mirrored-run.Ab12Cd"}
// agent_pid is the pid of the `mirrored rank-agent` that started the rank (on_failure =
// shrink launches), 0 when there is none. run_state_dir is the chief's run-state directory
// (core/run_state.h), as an absolute path, where `mirrored resize RUN_DIR` leaves its
// request; "" when the job was not started by a launch script. Written when training begins and again by each
// Trainer after a membership change (the survivors, renumbered), whole or not at all
// (core/file_replacement.h).
#include <cstdint>

#include "mirrored/checkpoint/run_directory.h"
#include "mirrored/comm/communicator.h"

namespace mirrored::train {

inline constexpr const char* kRankTableFile = "ranks.jsonl";

// Collective over `comm`: every rank sends its host and pids; the chief (`write`) writes the
// file. `step`: the step training (re)starts from.
void record_ranks(comm::Communicator& comm, const checkpoint::RunDirectory& run_dir, bool write, int64_t step);

}  // namespace mirrored::train
