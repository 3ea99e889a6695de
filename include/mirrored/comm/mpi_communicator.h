#pragma once
// Collectives over an MPI communicator on host buffers. Does not own MPI's lifetime (the
// runtime does, and owns every communicator); it duplicates the communicator it is given,
// so its traffic never mixes with anyone else's. Every blocking collective is watched by the job's watchdog, when
// one is given, so a missing peer ends the job instead of hanging it.
#include <mpi.h>

#include <cstdint>

#include "mirrored/comm/communicator.h"
#include "mirrored/comm/health/watchdog.h"

namespace mirrored::comm {

class MpiCommunicator final : public Communicator {
 public:
  // `name` names its channel in the flight recorder and in verdicts ("world", "gradients").
  explicit MpiCommunicator(MPI_Comm comm, CollectiveWatchdog* watchdog = nullptr, const char* name = "mpi");
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }
  Capabilities capabilities() const override {
    return {.nonblocking = true, .sharded_collectives = true, .point_to_point = true};
  }
  void allreduce(void* buffer, size_t count, DataType type, ReduceOp op) override;
  // MPI_Iallreduce: the handle's test() calls drive its progress (Open MPI progresses
  // nonblocking collectives only inside MPI calls). Any number may be in flight.
  std::unique_ptr<Work> allreduce_async(void* buffer, size_t count, DataType type, ReduceOp op) override;
  void broadcast(void* buffer, size_t count, DataType type, int root) override;
  void allgather(const void* send, void* recv, size_t count, DataType type) override;
  void sendrecv(const void* send, size_t send_count, int dest, void* recv, size_t recv_count, int source,
                DataType type) override;
  std::unique_ptr<Work> sendrecv_async(const void* send, size_t send_count, int dest, void* recv, size_t recv_count,
                                       int source, DataType type) override;
  void barrier() override;
  // Reduce-scatter: a ring of point-to-point messages (src/comm/mpi_ring_reduce_scatter.h
  // says why not MPI_Ireduce_scatter); all-gather: MPI_Iallgather(v) in place. Both are
  // progressed like allreduce_async.
  std::unique_ptr<Work> reduce_scatter_async(const void* send, void* recv, const std::vector<size_t>& counts,
                                             DataType type, ReduceOp op) override;
  // This rank's piece is left at its offset in `buffer`; the other pieces hold partial sums.
  std::unique_ptr<Work> reduce_scatter_inplace_async(void* buffer, const std::vector<size_t>& counts, DataType type,
                                                     ReduceOp op) override;
  std::unique_ptr<Work> allgather_inplace_async(void* buffer, const std::vector<size_t>& counts,
                                                DataType type) override;

  MPI_Comm handle() const { return comm_; }
  CollectiveWatchdog* watchdog() const { return watchdog_; }
  int channel() const { return channel_; }  // its number in the watchdog's flight recorder

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  CollectiveWatchdog* watchdog_ = nullptr;
  int channel_ = 0;
  int rank_ = 0;
  int size_ = 1;
  uint64_t ring_collectives_ = 0;  // reduce-scatters started: their message tags
  int next_ring_tag();
};

}  // namespace mirrored::comm
