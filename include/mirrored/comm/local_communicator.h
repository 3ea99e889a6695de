#pragma once
// A world of one process: every collective is the identity (kMean of one value is itself).
// Lets unit tests and single-process runs use the strategy without mpirun, and a one-GPU
// job run without NCCL: buffers may be host or device memory (an out-of-place copy of
// device memory waits for the device, then copies).
#include "mirrored/comm/communicator.h"

namespace mirrored::comm {

class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "local"; }
  // Every collective completes at once.
  Capabilities capabilities() const override {
    return {.device_buffers = true, .sharded_collectives = true, .point_to_point = true};
  }
  void allreduce(void* buffer, size_t count, DataType type, ReduceOp op) override;
  void broadcast(void* buffer, size_t count, DataType type, int root) override;
  void allgather(const void* send, void* recv, size_t count, DataType type) override;
  void barrier() override {}
  void sendrecv(const void* send, size_t send_count, int dest, void* recv, size_t recv_count, int source,
                DataType type) override;
  // Host buffers: the one piece is copied (reduce-scatter) or already in place (all-gather).
  std::unique_ptr<Work> reduce_scatter_async(const void* send, void* recv, const std::vector<size_t>& counts,
                                             DataType type, ReduceOp op) override;
  std::unique_ptr<Work> reduce_scatter_inplace_async(void* buffer, const std::vector<size_t>& counts, DataType type,
                                                     ReduceOp op) override;
  std::unique_ptr<Work> allgather_inplace_async(void* buffer, const std::vector<size_t>& counts,
                                                DataType type) override;
};

}  // namespace mirrored::comm
