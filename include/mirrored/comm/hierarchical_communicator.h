#pragma once
// Two-level all-reduce for jobs that span several nodes with several ranks on each
// (Horovod's HOROVOD_HIERARCHICAL_ALLREDUCE, NCCL's tree inside/ring across): the ranks of
// a node first reduce onto their node leader over shared memory, the leaders (one per
// node) all-reduce over the network, and each leader broadcasts the result back inside
// its node. Only 1/ranks-per-node of the traffic crosses the network.
//
// Nodes come from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), i.e. the ranks that share
// memory; tests (and callers that know better) may pass an explicit node colour instead.
// The result equals the flat all-reduce's up to float summation order. Everything else
// (broadcast, all-gather, barrier, and the reduce-scatter and all-gather of sharded
// optimizer state) is the flat MPI communicator's, which this one wraps: a reduce-scatter
// already sends each rank only its piece, so a second level would save no traffic.
//
// Every blocking operation is one watched collective (one CollectiveWatchdog::Scope), so
// the watchdog's per-rank counts stay equal on leaders and non-leaders alike.
#include <mpi.h>

#include <atomic>
#include <memory>

#include "mirrored/comm/communicator.h"
#include "mirrored/comm/health/watchdog.h"
#include "mirrored/comm/mpi_communicator.h"

namespace mirrored::comm {

class HierarchicalCommunicator final : public Communicator {
 public:
  static constexpr int kSharedMemoryNodes = -1;

  // Collective over `comm` (duplicated: every level is a communicator of its own, so two
  // instances never mix traffic). node_color: kSharedMemoryNodes, or a colour >= 0 per rank
  // (ranks with the same colour form one node).
  explicit HierarchicalCommunicator(MPI_Comm comm, CollectiveWatchdog* watchdog = nullptr,
                                    int node_color = kSharedMemoryNodes);
  ~HierarchicalCommunicator() override;
  HierarchicalCommunicator(const HierarchicalCommunicator&) = delete;
  HierarchicalCommunicator& operator=(const HierarchicalCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi-hierarchical"; }
  Capabilities capabilities() const override { return flat_->capabilities(); }
  using Communicator::allreduce;  // the typed conveniences
  using Communicator::broadcast;
  void allreduce(void* buffer, size_t count, DataType type, ReduceOp op) override;
  // Nonblocking: each test() advances the three stages (Ireduce, Iallreduce among leaders,
  // Ibcast), starting a stage when the one before it completes. Because stages start
  // lazily, their order on a communicator would depend on timing if two were in flight,
  // so at most one collective of this communicator may be pending (checked; see
  // max_in_flight()): the gradient reducer starts a bucket once the one before completed.
  std::unique_ptr<Work> allreduce_async(void* buffer, size_t count, DataType type, ReduceOp op) override;
  int max_in_flight() const override { return 1; }
  void broadcast(void* buffer, size_t count, DataType type, int root) override {
    flat_->broadcast(buffer, count, type, root);
  }
  void allgather(const void* send, void* recv, size_t count, DataType type) override {
    flat_->allgather(send, recv, count, type);
  }
  void sendrecv(const void* send, size_t send_count, int dest, void* recv, size_t recv_count, int source,
                DataType type) override {
    flat_->sendrecv(send, send_count, dest, recv, recv_count, source, type);
  }
  void barrier() override { flat_->barrier(); }
  std::unique_ptr<Work> reduce_scatter_async(const void* send, void* recv, const std::vector<size_t>& counts,
                                             DataType type, ReduceOp op) override {
    return flat_->reduce_scatter_async(send, recv, counts, type, op);
  }
  std::unique_ptr<Work> reduce_scatter_inplace_async(void* buffer, const std::vector<size_t>& counts, DataType type,
                                                     ReduceOp op) override {
    return flat_->reduce_scatter_inplace_async(buffer, counts, type, op);
  }
  std::unique_ptr<Work> allgather_inplace_async(void* buffer, const std::vector<size_t>& counts,
                                                DataType type) override {
    return flat_->allgather_inplace_async(buffer, counts, type);
  }

  int num_nodes() const { return num_nodes_; }
  bool is_leader() const { return node_rank_ == 0; }

 private:
  std::unique_ptr<MpiCommunicator> flat_;  // the whole job (a duplicate of the given comm)
  MPI_Comm node_ = MPI_COMM_NULL;     // the ranks of this node
  MPI_Comm leaders_ = MPI_COMM_NULL;  // rank 0 of every node; MPI_COMM_NULL elsewhere
  CollectiveWatchdog* watchdog_ = nullptr;
  int rank_ = 0, size_ = 1;
  int node_rank_ = 0, node_size_ = 1;  // within this node (node rank 0: the leader)
  int num_nodes_ = 1;
  std::atomic<bool> pending_{false};  // a nonblocking all-reduce is in flight

  friend class HierarchicalAllreduceWork;
};

}  // namespace mirrored::comm
