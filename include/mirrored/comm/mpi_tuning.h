#pragma once
// Settings for the MPI library that must be in place before MPI_Init.

namespace mirrored::comm {

// Open MPI's nonblocking all-reduce (coll/libnbc) picks, on its own, a binomial reduce
// followed by a broadcast for in-place buffers or fewer than 4 ranks: two full transfers
// one after the other, and progress only when the caller tests. The gradient buckets are
// exactly that case. The ring (a reduce-scatter then an all-gather, each rank sending
// 2(p-1)/p of the buffer) is what NCCL and Horovod use for gradients; on 2 ranks it
// brings MPI_Iallreduce of the mlp's 0.9 MB from ~2x MPI_Allreduce's time to parity
// (tests/bench/poll_latency.sh). Chooses the ring unless the user has set
// OMPI_MCA_coll_libnbc_iallreduce_algorithm (or `mpirun --mca` has, which sets the same
// variable). Other MPI libraries ignore the variable. Returns the algorithm in force.
const char* choose_nonblocking_allreduce_algorithm();

}  // namespace mirrored::comm
