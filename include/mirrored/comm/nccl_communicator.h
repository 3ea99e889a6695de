#pragma once
// Collectives between GPUs with NCCL, one GPU per rank (CUDA build only). The runtime
// creates the job's only one; every device collective (parameter broadcast, sync batch
// norm, gradient buckets) goes through it from the main thread, in program order, so no two
// NCCL communicators ever race for the same GPUs.
//
// Bootstrap (collective over `bootstrap`, the MPI world or a world of one): the current
// device is set, rank 0 calls ncclGetUniqueId, the id's bytes are broadcast over
// `bootstrap` (MPI_Bcast), and every rank calls ncclCommInitRankConfig with blocking = 0.
// Nonblocking NCCL returns at once and reports progress through ncclCommGetAsyncError, so
// initialisation and every enqueue are polled against the collective timeout too.
//
// Streams: the communicator has its own non-blocking stream. A collective first makes that
// stream wait on an event recorded on the device's compute stream (so it reads buffers
// only once the kernels queued before it wrote them, without a device-wide sync), records
// a start event, runs, then records a completion event. Its Work handle polls those events
// and ncclCommGetAsyncError. The timeout counts from when the stream reaches the
// collective (the first poll that finds the start event complete), not from when the host
// queued it, so GPU compute ahead of it is not counted: at half the timeout it warns, and a
// collective that has not finished within `timeout_seconds` aborts the NCCL communicator
// (ncclCommAbort) and the job (comm::abort_job, exit 5) with a message naming the
// operation. Before the stream runs it, a nonblocking call that NCCL has not yet taken
// (ncclInProgress: joining or connecting peers) is timed on the host from the call.
//
// With survive_failures (on_failure = shrink) a lost peer ends only the communicator: a
// timeout, an asynchronous error that says a peer or its network went away (ncclRemoteError,
// ncclSystemError), or a failure the process saw on MPI meanwhile (comm::revocations()
// moved; the watchdog thread hears of one while this thread polls NCCL) aborts the NCCL
// communicator, revokes the job's MPI communicators and throws comm::PeerFailure, for the
// survivors' recovery, which bootstraps a new one over the shrunk world. Such a
// communicator is aborted, not finalised, when it goes (its peers may be gone).
//
// kMean is the sum, then the sum times 1.0f / size() on the compute stream once the sum
// completed (ncclAvg would scale every input by 1/n before summing: other rounding than
// the contract's, which MPI backends follow; comm/mean.h). Device buffers of float only.
//
// The blocking Communicator interface takes device or host buffers; host buffers (small
// scalars, strings) are staged through device memory. allreduce_async takes device
// buffers (a host buffer runs the blocking path).
#include <memory>

#include "mirrored/comm/communicator.h"

namespace mirrored::comm {

class CollectiveClock;  // when the stream reached a collective (nccl_communicator.cpp)

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Communicator& bootstrap, int device, double timeout_seconds, bool survive_failures = false);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }
  Capabilities capabilities() const override {
    return {.device_buffers = true, .nonblocking = true, .sharded_collectives = true};
  }

  using Communicator::allreduce;  // the typed conveniences stay visible
  using Communicator::broadcast;
  void allreduce(void* buffer, size_t count, DataType type, ReduceOp op) override;
  std::unique_ptr<Work> allreduce_async(void* buffer, size_t count, DataType type, ReduceOp op) override;
  void broadcast(void* buffer, size_t count, DataType type, int root) override;
  void allgather(const void* send, void* recv, size_t count, DataType type) override;
  void barrier() override;
  // Device buffers only; a mean divides this rank's piece on the compute stream.
  std::unique_ptr<Work> reduce_scatter_async(const void* send, void* recv, const std::vector<size_t>& counts,
                                             DataType type, ReduceOp op) override;
  std::unique_ptr<Work> reduce_scatter_inplace_async(void* buffer, const std::vector<size_t>& counts, DataType type,
                                                     ReduceOp op) override;
  std::unique_ptr<Work> allgather_inplace_async(void* buffer, const std::vector<size_t>& counts,
                                                DataType type) override;

  int device() const { return device_; }

  // NCCL's version as an integer (e.g. 22809 for 2.28.9).
  static int version();

 private:
  struct State;  // the NCCL communicator, streams, events, staging buffers and the polling
  friend class NcclWork;
  void* staging(size_t bytes);  // device scratch (and its pinned host twin) for host buffers
  void stage_in(void* dev, const void* host, size_t bytes);
  void stage_out_and_wait(void* host, const void* dev, size_t bytes, const char* operation, size_t count,
                          CollectiveClock& clock);

  int device_ = 0;
  double timeout_ = 0.0;
  int rank_ = 0, size_ = 1;
  std::unique_ptr<State> state_;
};

}  // namespace mirrored::comm
