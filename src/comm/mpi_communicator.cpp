#include "mirrored/comm/mpi_communicator.h"

#include <climits>
#include <exception>

#include "mirrored/comm/mpi_check.h"
#include "mean.h"
#include "mirrored/comm/mpi_types.h"

namespace mirrored::comm {

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return str_cat("MPI error ", code);
  return std::string(text, static_cast<size_t>(length));
}


MpiCommunicator::MpiCommunicator(MPI_Comm comm, CollectiveWatchdog* watchdog) : watchdog_(watchdog) {
  MIRRORED_MPI_CHECK(MPI_Comm_dup(comm, &comm_));
  // Errors come back as codes so they reach MIRRORED_MPI_CHECK with their location.
  MIRRORED_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  MIRRORED_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  MIRRORED_MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

MpiCommunicator::~MpiCommunicator() {
  // While an error unwinds towards MPI_Abort, freeing (a synchronising call) could wait
  // for peers that never come; the abort reclaims everything anyway.
  if (std::uncaught_exceptions() > 0) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm_ != MPI_COMM_NULL && !finalized) MIRRORED_MPI_LOG(MPI_Comm_free(&comm_));
}

namespace {
class MpiAllreduceWork final : public Work {
 public:
  MpiAllreduceWork(CollectiveWatchdog* watchdog, void* buffer, size_t count, DataType type, ReduceOp op, int size,
                   MPI_Request request)
      : watch_(watchdog, "allreduce", count),
        buffer_(buffer), count_(count), type_(type), op_(op), size_(size), request_(request) {}
  ~MpiAllreduceWork() override {
    if (!done_ && std::uncaught_exceptions() == 0) rank_warning("an all-reduce was dropped while in flight");
  }
  bool test() override {
    if (done_) return true;
    int complete = 0;
    MIRRORED_MPI_CHECK(MPI_Test(&request_, &complete, MPI_STATUS_IGNORE));
    if (complete) finish();
    return done_;
  }
  using Work::wait;
  void wait() override {
    if (done_) return;
    MIRRORED_MPI_CHECK(MPI_Wait(&request_, MPI_STATUS_IGNORE));
    finish();
  }

 private:
  void finish() {
    divide_for_mean(buffer_, count_, type_, op_, size_);
    done_ = true;
  }

  CollectiveWatchdog::Scope watch_;  // in flight until destroyed
  void* buffer_;
  size_t count_;
  DataType type_;
  ReduceOp op_;
  int size_;
  MPI_Request request_;
  bool done_ = false;
};
}  // namespace

void MpiCommunicator::allreduce(void* buffer, size_t count, DataType type, ReduceOp op) {
  const MPI_Op mpi_op = mpi_reduce_op(type, op);
  CollectiveWatchdog::Scope watch(watchdog_, "allreduce", count);
  MIRRORED_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buffer, mpi_count(count), mpi_datatype(type), mpi_op, comm_));
  divide_for_mean(buffer, count, type, op, size_);
}

std::unique_ptr<Work> MpiCommunicator::allreduce_async(void* buffer, size_t count, DataType type, ReduceOp op) {
  const MPI_Op mpi_op = mpi_reduce_op(type, op);
  MPI_Request request;
  MIRRORED_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buffer, mpi_count(count), mpi_datatype(type), mpi_op, comm_, &request));
  return std::make_unique<MpiAllreduceWork>(watchdog_, buffer, count, type, op, size_, request);
}

void MpiCommunicator::broadcast(void* buffer, size_t count, DataType type, int root) {
  CollectiveWatchdog::Scope watch(watchdog_, "broadcast", count);
  MIRRORED_MPI_CHECK(MPI_Bcast(buffer, mpi_count(count), mpi_datatype(type), root, comm_));
}

void MpiCommunicator::allgather(const void* send, void* recv, size_t count, DataType type) {
  CollectiveWatchdog::Scope watch(watchdog_, "allgather", count);
  MIRRORED_MPI_CHECK(MPI_Allgather(send, mpi_count(count), mpi_datatype(type), recv, mpi_count(count),
                                   mpi_datatype(type), comm_));
}

void MpiCommunicator::barrier() {
  CollectiveWatchdog::Scope watch(watchdog_, "barrier", 0);
  MIRRORED_MPI_CHECK(MPI_Barrier(comm_));
}

}  // namespace mirrored::comm
