#pragma once
// A nonblocking ring reduce-scatter over MPI point-to-point messages.
//
// Open MPI's MPI_Ireduce_scatter(_block) (coll/libnbc) reduces the whole buffer to rank 0
// over a binomial tree and then scatters the pieces from there: the root receives log2(p)
// full buffers and sends p-1 pieces, so the collective is slower than an all-reduce of the
// same buffer, and gets worse with every rank added. The ring moves (p-1)/p of the buffer
// through each rank, the first half of a ring all-reduce: in round s (0 <= s < p-1) rank r
// sends piece (r-s-1) mod p to rank r+1 and adds the piece (r-s-2) mod p it receives from
// rank r-1 into its own copy of that piece. After p-1 rounds rank r holds the complete sum
// of piece r, at that piece's offset in the buffer; the buffer's other pieces hold partial
// sums. Piece c is summed in the fixed order c+1, c+2, ..., c (ranks mod p), the same on
// every run of the same world size.
//
// Rounds advance inside test() (and the spinning wait()), the way MPI progresses its own
// nonblocking collectives: the caller's polling drives it.
#include <cstddef>
#include <memory>
#include <vector>

#include <mpi.h>

#include "mirrored/comm/communicator.h"
#include "mirrored/comm/health/watchdog.h"

namespace mirrored::comm {

struct RingPieces {
  std::vector<size_t> counts;   // per rank, elements
  std::vector<size_t> offsets;  // per rank, elements from the buffer's start
};

// Reduces `buffer` (this rank's full contribution, overwritten) over `comm` in place. `tag`
// must be the same on every rank for this collective and differ from any other ring
// collective in flight on `comm`. kMean divides this rank's piece once it is complete.
std::unique_ptr<Work> start_ring_reduce_scatter_inplace(MPI_Comm comm, int tag, CollectiveWatchdog* watchdog,
                                                        int channel, void* buffer, RingPieces pieces, DataType type, ReduceOp op);
// The same from `send` (left untouched: the ring runs in a copy) into `recv`, which gets
// this rank's piece only.
std::unique_ptr<Work> start_ring_reduce_scatter(MPI_Comm comm, int tag, CollectiveWatchdog* watchdog,
                                                int channel, const void* send, void* recv, RingPieces pieces, DataType type,
                                                ReduceOp op);

}  // namespace mirrored::comm
