#pragma once
// Collectives over an MPI communicator on host buffers. Does not own MPI's lifetime (the
// runtime does); it duplicates the communicator it is given, so its traffic never mixes
// with anyone else's.
#include <mpi.h>

#include "mirrored/comm/communicator.h"

namespace mirrored::comm {

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }
  void allreduce(void* buffer, size_t count, DataType type, ReduceOp op) override;
  void broadcast(void* buffer, size_t count, DataType type, int root) override;
  void allgather(const void* send, void* recv, size_t count, DataType type) override;
  void barrier() override;

  MPI_Comm handle() const { return comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace mirrored::comm
