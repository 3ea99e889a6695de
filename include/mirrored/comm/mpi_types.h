#pragma once
// Mapping of the Communicator's element types and reductions onto MPI's, for backends
// that call MPI directly.
#include <mpi.h>

#include <cstddef>

#include "mirrored/comm/communicator.h"

namespace mirrored::comm {

MPI_Datatype mpi_datatype(DataType type);
// The MPI operation that performs `op` on `type` (bf16 sums use a user-defined op: MPI
// has no bfloat16). Checks that the combination is supported (kMean: floating types;
// bf16: sum and mean only). kMean maps to a sum; finish it with mean_from_sum() (comm/mean.h).
MPI_Op mpi_reduce_op(DataType type, ReduceOp op);
// MPI counts are int: checks that `count` fits.
int mpi_count(size_t count);

}  // namespace mirrored::comm
