#pragma once
// Collectives between GPUs with NCCL, one GPU per rank (CUDA build only).
//
// Bootstrap (collective over `bootstrap`, the MPI world or a world of one): the current
// device is set, rank 0 calls ncclGetUniqueId, the id's bytes are broadcast over
// `bootstrap` (MPI_Bcast), and every rank calls ncclCommInitRank.
//
// Streams: the communicator has its own non-blocking stream. A collective first makes that
// stream wait on an event recorded on the device's compute stream (so it reads buffers
// only once the kernels that wrote them are done, without a device-wide sync), then runs,
// then records a completion event the caller waits on. The wait polls the event and
// ncclCommGetAsyncError against a deadline: a collective that does not finish within
// `timeout_seconds` aborts the NCCL communicator (ncclCommAbort) and the job (exit 5) with
// a message naming the operation, instead of hanging.
//
// The blocking Communicator interface takes device or host buffers; host buffers (small
// scalars, strings) are staged through device memory.
#include <cuda_runtime.h>

#include <memory>

#include "mirrored/comm/communicator.h"

namespace mirrored::comm {

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Communicator& bootstrap, int device, double timeout_seconds);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }
  std::unique_ptr<Communicator> duplicate() override;

  using Communicator::allreduce;  // the typed conveniences stay visible
  using Communicator::broadcast;
  void allreduce(void* buffer, size_t count, DataType type, ReduceOp op) override;
  void broadcast(void* buffer, size_t count, DataType type, int root) override;
  void allgather(const void* send, void* recv, size_t count, DataType type) override;
  void barrier() override;

  // The pieces of a collective, for callers that order their own work (the gradient
  // reducer): wait_for() gates the stream on `ready` (recorded on the compute stream when
  // the data was complete), enqueue_allreduce() queues an in-place all-reduce of a device
  // buffer, and synchronize() records the completion event and waits for it under the
  // timeout. Kernels may be queued on stream() in between.
  int device() const { return device_; }
  cudaStream_t stream() const;
  void wait_for(cudaEvent_t ready);
  void enqueue_allreduce(void* device_buffer, size_t count, DataType type, ReduceOp op);
  void synchronize(const char* operation, size_t count);

  // NCCL's version as an integer (e.g. 22809 for 2.28.9).
  static int version();

 private:
  struct State;
  void gate_on_compute_stream();
  void* staging(size_t bytes);  // device scratch (and its pinned host twin) for host buffers
  void stage_in(void* dev, const void* host, size_t bytes);
  void stage_out_and_wait(void* host, const void* dev, size_t bytes, const char* operation, size_t count);

  Communicator& bootstrap_;
  int device_ = 0;
  double timeout_ = 0.0;
  int rank_ = 0, size_ = 1;
  std::unique_ptr<State> state_;
};

}  // namespace mirrored::comm
