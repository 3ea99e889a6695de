#pragma once
// What each replica holds for training: parameters, gradients and optimizer state (the
// part sharding divides). Reported at start-up, one line per rank on the chief, and as
// the first record of metrics.jsonl: {"kind": "memory", ...}, the largest over replicas.
#include <cstdint>

#include "mirrored/comm/communicator.h"
#include "mirrored/distribute/distributed_model.h"
#include "mirrored/io/jsonl_writer.h"
#include "mirrored/optim/optimizer.h"

namespace mirrored::train {

struct MemoryFootprint {
  int64_t param_bytes = 0;
  int64_t grad_bytes = 0;
  int64_t optimizer_state_bytes = 0;
};

MemoryFootprint memory_footprint(distribute::DistributedModel& model, optim::Optimizer& optimizer);

// Collective over `comm`: prints every rank's footprint on the chief and returns the
// largest of each field over ranks.
MemoryFootprint report_memory(comm::Communicator& comm, const MemoryFootprint& mine);

io::JsonRecord memory_record(const MemoryFootprint& footprint);

}  // namespace mirrored::train
