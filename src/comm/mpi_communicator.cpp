#include "mirrored/comm/mpi_communicator.h"

#include <climits>
#include <exception>

#include "mirrored/comm/mpi_check.h"

namespace mirrored::comm {

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return str_cat("MPI error ", code);
  return std::string(text, static_cast<size_t>(length));
}

namespace {
MPI_Datatype to_mpi(DataType type) {
  switch (type) {
    case DataType::kF32: return MPI_FLOAT;
    case DataType::kF64: return MPI_DOUBLE;
    case DataType::kI32: return MPI_INT32_T;
    case DataType::kI64: return MPI_INT64_T;
    case DataType::kU8: return MPI_UINT8_T;
    case DataType::kBF16: return MPI_UINT16_T;  // reduced by bf16_sum_op() below
  }
  return MPI_DATATYPE_NULL;
}

// MPI has no bfloat16: sum pairs in float32 and round back, as the wire format wants.
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = float_to_bf16(bf16_to_float(a[i]) + bf16_to_float(b[i]));
}

MPI_Op bf16_sum_op() {
  // Created once, on first use, by whichever thread gets here first; never freed (MPI
  // frees user ops at MPI_Finalize).
  static const MPI_Op op = [] {
    MPI_Op created;
    MIRRORED_MPI_CHECK(MPI_Op_create(&bf16_sum, /*commute=*/1, &created));
    return created;
  }();
  return op;
}

MPI_Op to_mpi(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kMean: return MPI_SUM;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kMin: return MPI_MIN;
  }
  return MPI_OP_NULL;
}

int checked_count(size_t count) {
  // MPI counts are int; buffers past 2^31 elements would need chunking, which no model
  // here comes near. Say so rather than truncate.
  MIRRORED_CHECK(count <= static_cast<size_t>(INT_MAX), "collective of ", count,
                 " elements exceeds MPI's int count");
  return static_cast<int>(count);
}

template <typename T>
void divide(void* buffer, size_t count, int by) {
  auto* values = static_cast<T*>(buffer);
  const T scale = T(1) / static_cast<T>(by);
  for (size_t i = 0; i < count; ++i) values[i] *= scale;
}

void divide_bf16(void* buffer, size_t count, int by) {
  auto* values = static_cast<uint16_t*>(buffer);
  const float scale = 1.0f / static_cast<float>(by);
  for (size_t i = 0; i < count; ++i) values[i] = float_to_bf16(bf16_to_float(values[i]) * scale);
}

bool is_floating(DataType type) {
  return type == DataType::kF32 || type == DataType::kF64 || type == DataType::kBF16;
}
}  // namespace

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

std::unique_ptr<Communicator> MpiCommunicator::duplicate() {
  return std::make_unique<MpiCommunicator>(comm_, watchdog_);
}

namespace {
MPI_Op checked_op(DataType type, ReduceOp op) {
  MIRRORED_CHECK(op != ReduceOp::kMean || is_floating(type), "mean all-reduce of ", datatype_name(type));
  MIRRORED_CHECK(type != DataType::kBF16 || op == ReduceOp::kSum || op == ReduceOp::kMean,
                 "bfloat16 all-reduce supports sum and mean only");
  return type == DataType::kBF16 ? bf16_sum_op() : to_mpi(op);
}

void finish_mean(void* buffer, size_t count, DataType type, ReduceOp op, int size) {
  if (op != ReduceOp::kMean || size == 1) return;
  if (type == DataType::kF32) divide<float>(buffer, count, size);
  if (type == DataType::kF64) divide<double>(buffer, count, size);
  if (type == DataType::kBF16) divide_bf16(buffer, count, size);
}

class MpiPendingAllreduce final : public PendingCollective {
 public:
  MpiPendingAllreduce(CollectiveWatchdog* watchdog, void* buffer, size_t count, DataType type, ReduceOp op,
                      int size, MPI_Request request)
      : watch_(watchdog, "allreduce", count),
        buffer_(buffer), count_(count), type_(type), op_(op), size_(size), request_(request) {}
  ~MpiPendingAllreduce() override {
    if (!done_ && std::uncaught_exceptions() == 0) rank_warning("an all-reduce was dropped while in flight");
  }
  bool test() override {
    if (done_) return true;
    int complete = 0;
    MIRRORED_MPI_CHECK(MPI_Test(&request_, &complete, MPI_STATUS_IGNORE));
    if (!complete) return false;
    finish_mean(buffer_, count_, type_, op_, size_);
    done_ = true;
    return true;
  }

 private:
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
  const MPI_Op mpi_op = checked_op(type, op);
  CollectiveWatchdog::Scope watch(watchdog_, "allreduce", count);
  MIRRORED_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buffer, checked_count(count), to_mpi(type), mpi_op, comm_));
  finish_mean(buffer, count, type, op, size_);
}

std::unique_ptr<PendingCollective> MpiCommunicator::allreduce_async(void* buffer, size_t count, DataType type,
                                                                    ReduceOp op) {
  const MPI_Op mpi_op = checked_op(type, op);
  MPI_Request request;
  MIRRORED_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buffer, checked_count(count), to_mpi(type), mpi_op, comm_, &request));
  return std::make_unique<MpiPendingAllreduce>(watchdog_, buffer, count, type, op, size_, request);
}

void MpiCommunicator::broadcast(void* buffer, size_t count, DataType type, int root) {
  CollectiveWatchdog::Scope watch(watchdog_, "broadcast", count);
  MIRRORED_MPI_CHECK(MPI_Bcast(buffer, checked_count(count), to_mpi(type), root, comm_));
}

void MpiCommunicator::allgather(const void* send, void* recv, size_t count, DataType type) {
  CollectiveWatchdog::Scope watch(watchdog_, "allgather", count);
  MIRRORED_MPI_CHECK(MPI_Allgather(send, checked_count(count), to_mpi(type), recv, checked_count(count),
                                   to_mpi(type), comm_));
}

void MpiCommunicator::barrier() {
  CollectiveWatchdog::Scope watch(watchdog_, "barrier", 0);
  MIRRORED_MPI_CHECK(MPI_Barrier(comm_));
}

}  // namespace mirrored::comm
