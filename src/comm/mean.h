#pragma once
// kMean for backends that sum on the wire (MPI, and NCCL's staged host buffers): the sum
// over ranks, then one division, so every backend rounds the same way.
#include <cstddef>

#include "mirrored/comm/communicator.h"

namespace mirrored::comm {

// Turns a summed host buffer into the mean over `ranks` (no-op for other ops or ranks <= 1).
void divide_for_mean(void* buffer, size_t count, DataType type, ReduceOp op, int ranks);

}  // namespace mirrored::comm
