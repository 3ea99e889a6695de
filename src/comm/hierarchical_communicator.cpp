#include "mirrored/comm/hierarchical_communicator.h"

#include <exception>

#include "mirrored/comm/mpi_check.h"
#include "mirrored/comm/mpi_types.h"

namespace mirrored::comm {
namespace {
void free_comm(MPI_Comm& comm) {
  if (comm != MPI_COMM_NULL) MIRRORED_MPI_LOG(MPI_Comm_free(&comm));
}
}  // namespace

HierarchicalCommunicator::HierarchicalCommunicator(MPI_Comm comm, CollectiveWatchdog* watchdog, int node_color)
    : watchdog_(watchdog), node_color_(node_color) {
  MIRRORED_CHECK(node_color >= 0 || node_color == kSharedMemoryNodes, "node colour ", node_color,
                 " must be >= 0 or kSharedMemoryNodes");
  MIRRORED_MPI_CHECK(MPI_Comm_dup(comm, &world_));
  MIRRORED_MPI_CHECK(MPI_Comm_set_errhandler(world_, MPI_ERRORS_RETURN));
  MIRRORED_MPI_CHECK(MPI_Comm_rank(world_, &rank_));
  MIRRORED_MPI_CHECK(MPI_Comm_size(world_, &size_));
  // Keys are world ranks, so every level keeps the world's rank order: the leader of a
  // node is its lowest world rank, and leaders are ordered as their nodes' first ranks.
  if (node_color == kSharedMemoryNodes) {
    MIRRORED_MPI_CHECK(MPI_Comm_split_type(world_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_));
  } else {
    MIRRORED_MPI_CHECK(MPI_Comm_split(world_, node_color, rank_, &node_));
  }
  MIRRORED_MPI_CHECK(MPI_Comm_set_errhandler(node_, MPI_ERRORS_RETURN));
  MIRRORED_MPI_CHECK(MPI_Comm_rank(node_, &node_rank_));
  MIRRORED_MPI_CHECK(MPI_Comm_size(node_, &node_size_));
  MIRRORED_MPI_CHECK(MPI_Comm_split(world_, node_rank_ == 0 ? 0 : MPI_UNDEFINED, rank_, &leaders_));
  if (leaders_ != MPI_COMM_NULL) {
    MIRRORED_MPI_CHECK(MPI_Comm_set_errhandler(leaders_, MPI_ERRORS_RETURN));
    MIRRORED_MPI_CHECK(MPI_Comm_size(leaders_, &num_nodes_));
  }
  // Non-leaders learn the node count from their leader.
  MIRRORED_MPI_CHECK(MPI_Bcast(&num_nodes_, 1, MPI_INT, 0, node_));
}

HierarchicalCommunicator::~HierarchicalCommunicator() {
  // As MpiCommunicator: freeing synchronises, so never while an error unwinds to MPI_Abort.
  if (std::uncaught_exceptions() > 0) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  free_comm(leaders_);
  free_comm(node_);
  free_comm(world_);
}

std::unique_ptr<Communicator> HierarchicalCommunicator::duplicate() {
  // The same split over a fresh duplicate of the world: new communicators at every level.
  return std::make_unique<HierarchicalCommunicator>(world_, watchdog_, node_color_);
}

void HierarchicalCommunicator::allreduce(void* buffer, size_t count, DataType type, ReduceOp op) {
  const MPI_Op mpi_op = mpi_reduce_op(type, op);
  const MPI_Datatype mpi_type = mpi_datatype(type);
  const int n = mpi_count(count);
  CollectiveWatchdog::Scope watch(watchdog_, "allreduce", count);
  // 1. reduce onto the node leader (shared memory)
  if (node_size_ > 1) {
    if (node_rank_ == 0) {
      MIRRORED_MPI_CHECK(MPI_Reduce(MPI_IN_PLACE, buffer, n, mpi_type, mpi_op, 0, node_));
    } else {
      MIRRORED_MPI_CHECK(MPI_Reduce(buffer, nullptr, n, mpi_type, mpi_op, 0, node_));
    }
  }
  // 2. all-reduce of the node sums among the leaders (the network)
  if (leaders_ != MPI_COMM_NULL && num_nodes_ > 1)
    MIRRORED_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buffer, n, mpi_type, mpi_op, leaders_));
  // 3. the leader hands the result to its node
  if (node_size_ > 1) MIRRORED_MPI_CHECK(MPI_Bcast(buffer, n, mpi_type, 0, node_));
  divide_for_mean(buffer, count, type, op, size_);
}

void HierarchicalCommunicator::broadcast(void* buffer, size_t count, DataType type, int root) {
  CollectiveWatchdog::Scope watch(watchdog_, "broadcast", count);
  MIRRORED_MPI_CHECK(MPI_Bcast(buffer, mpi_count(count), mpi_datatype(type), root, world_));
}

void HierarchicalCommunicator::allgather(const void* send, void* recv, size_t count, DataType type) {
  CollectiveWatchdog::Scope watch(watchdog_, "allgather", count);
  MIRRORED_MPI_CHECK(MPI_Allgather(send, mpi_count(count), mpi_datatype(type), recv, mpi_count(count),
                                   mpi_datatype(type), world_));
}

void HierarchicalCommunicator::barrier() {
  CollectiveWatchdog::Scope watch(watchdog_, "barrier", 0);
  MIRRORED_MPI_CHECK(MPI_Barrier(world_));
}

}  // namespace mirrored::comm
