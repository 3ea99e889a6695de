#include "mirrored/comm/hierarchical_communicator.h"

#include <exception>

#include "mirrored/comm/failure/fault_tolerance.h"
#include "mirrored/comm/failure/mpi_check.h"
#include "mean.h"
#include "mirrored/comm/mpi_types.h"
#include "mirrored/core/log.h"

namespace mirrored::comm {
namespace {
void free_comm(MPI_Comm& comm) {
  if (comm != MPI_COMM_NULL) MIRRORED_MPI_LOG(MPI_Comm_free(&comm));
}
}  // namespace

HierarchicalCommunicator::HierarchicalCommunicator(MPI_Comm comm, CollectiveWatchdog* watchdog, int node_color)
    : flat_(std::make_unique<MpiCommunicator>(comm, watchdog, "gradients")), watchdog_(watchdog) {
  MIRRORED_CHECK(node_color >= 0 || node_color == kSharedMemoryNodes, "node colour ", node_color,
                 " must be >= 0 or kSharedMemoryNodes");
  const MPI_Comm world = flat_->handle();
  rank_ = flat_->rank();
  size_ = flat_->size();
  // Keys are world ranks, so every level keeps the world's rank order: the leader of a
  // node is its lowest world rank, and leaders are ordered as their nodes' first ranks.
  if (node_color == kSharedMemoryNodes) {
    MIRRORED_MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_));
  } else {
    MIRRORED_MPI_CHECK(MPI_Comm_split(world, node_color, rank_, &node_));
  }
  MIRRORED_MPI_CHECK(MPI_Comm_set_errhandler(node_, MPI_ERRORS_RETURN));
  track_communicator(node_);
  MIRRORED_MPI_CHECK(MPI_Comm_rank(node_, &node_rank_));
  MIRRORED_MPI_CHECK(MPI_Comm_size(node_, &node_size_));
  MIRRORED_MPI_CHECK(MPI_Comm_split(world, node_rank_ == 0 ? 0 : MPI_UNDEFINED, rank_, &leaders_));
  if (leaders_ != MPI_COMM_NULL) {
    MIRRORED_MPI_CHECK(MPI_Comm_set_errhandler(leaders_, MPI_ERRORS_RETURN));
    track_communicator(leaders_);
    MIRRORED_MPI_CHECK(MPI_Comm_size(leaders_, &num_nodes_));
  }
  // Non-leaders learn the node count from their leader.
  MIRRORED_MPI_CHECK(MPI_Bcast(&num_nodes_, 1, MPI_INT, 0, node_));
}

HierarchicalCommunicator::~HierarchicalCommunicator() {
  untrack_communicator(leaders_);
  untrack_communicator(node_);
  // As MpiCommunicator: freeing synchronises, so never while an error unwinds to MPI_Abort.
  if (std::uncaught_exceptions() > 0) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  free_comm(leaders_);
  free_comm(node_);
}

void HierarchicalCommunicator::allreduce(void* buffer, size_t count, DataType type, ReduceOp op) {
  MIRRORED_CHECK(!pending_, "a blocking all-reduce while a nonblocking one is in flight");
  const MPI_Op mpi_op = mpi_reduce_op(type, op);
  const MPI_Datatype mpi_type = mpi_datatype(type);
  const int n = mpi_count(count);
  CollectiveWatchdog::Scope watch(watchdog_, {"allreduce", count, type, flat_->channel()});
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
  mean_from_sum(buffer, count, type, op, size_);
}

class HierarchicalAllreduceWork final : public Work {
 public:
  HierarchicalAllreduceWork(HierarchicalCommunicator& comm, void* buffer, size_t count, DataType type,
                               ReduceOp op)
      : comm_(comm), watch_(comm.watchdog_, CollectiveCall{"allreduce", count, type, comm.flat_->channel()}), buffer_(buffer), count_(count), type_(type),
        op_(op), mpi_type_(mpi_datatype(type)), mpi_op_(mpi_reduce_op(type, op)), n_(mpi_count(count)) {
    start(Stage::kReduce);
  }
  ~HierarchicalAllreduceWork() override {
    if (stage_ != Stage::kDone && std::uncaught_exceptions() == 0)
      rank_warning("a hierarchical all-reduce was dropped while in flight");
    comm_.pending_ = false;
  }
  bool test() override {
    while (stage_ != Stage::kDone) {
      if (request_ != MPI_REQUEST_NULL) {
        int complete = 0;
        MIRRORED_MPI_CHECK(MPI_Test(&request_, &complete, MPI_STATUS_IGNORE));
        if (!complete) return false;
      }
      start(static_cast<Stage>(static_cast<int>(stage_) + 1));
    }
    return true;
  }

 private:
  enum class Stage { kReduce, kLeaders, kBroadcast, kDone };

  // Starts `stage`'s request; a stage this rank takes no part in leaves it null, so the
  // next test() moves straight on.
  void start(Stage stage) {
    stage_ = stage;
    request_ = MPI_REQUEST_NULL;
    switch (stage) {
      case Stage::kReduce:
        if (comm_.node_size_ > 1) {
          const void* send = comm_.node_rank_ == 0 ? MPI_IN_PLACE : buffer_;
          void* recv = comm_.node_rank_ == 0 ? buffer_ : nullptr;
          MIRRORED_MPI_CHECK(MPI_Ireduce(send, recv, n_, mpi_type_, mpi_op_, 0, comm_.node_, &request_));
        }
        break;
      case Stage::kLeaders:
        if (comm_.leaders_ != MPI_COMM_NULL && comm_.num_nodes_ > 1)
          MIRRORED_MPI_CHECK(
              MPI_Iallreduce(MPI_IN_PLACE, buffer_, n_, mpi_type_, mpi_op_, comm_.leaders_, &request_));
        break;
      case Stage::kBroadcast:
        if (comm_.node_size_ > 1) MIRRORED_MPI_CHECK(MPI_Ibcast(buffer_, n_, mpi_type_, 0, comm_.node_, &request_));
        break;
      case Stage::kDone:
        mean_from_sum(buffer_, count_, type_, op_, comm_.size_);
        break;
    }
  }

  HierarchicalCommunicator& comm_;
  CollectiveWatchdog::Scope watch_;  // in flight until destroyed
  void* buffer_;
  size_t count_;
  DataType type_;
  ReduceOp op_;
  MPI_Datatype mpi_type_;
  MPI_Op mpi_op_;
  int n_;
  Stage stage_ = Stage::kReduce;
  MPI_Request request_ = MPI_REQUEST_NULL;
};

std::unique_ptr<Work> HierarchicalCommunicator::allreduce_async(void* buffer, size_t count, DataType type,
                                                                ReduceOp op) {
  MIRRORED_CHECK(!pending_.exchange(true), "a second nonblocking all-reduce on one hierarchical communicator");
  try {
    return std::make_unique<HierarchicalAllreduceWork>(*this, buffer, count, type, op);
  } catch (...) {
    pending_ = false;
    throw;
  }
}

}  // namespace mirrored::comm
