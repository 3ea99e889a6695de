#include "mirrored/comm/mpi_communicator.h"

#include <climits>

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
  }
  return MPI_DATATYPE_NULL;
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
}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm) {
  MIRRORED_MPI_CHECK(MPI_Comm_dup(comm, &comm_));
  // Errors come back as codes so they reach MIRRORED_MPI_CHECK with their location.
  MIRRORED_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  MIRRORED_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  MIRRORED_MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm_ != MPI_COMM_NULL && !finalized) MIRRORED_MPI_LOG(MPI_Comm_free(&comm_));
}

void MpiCommunicator::allreduce(void* buffer, size_t count, DataType type, ReduceOp op) {
  const bool floating = type == DataType::kF32 || type == DataType::kF64;
  MIRRORED_CHECK(op != ReduceOp::kMean || floating, "mean all-reduce of an integer type");
  MIRRORED_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buffer, checked_count(count), to_mpi(type), to_mpi(op), comm_));
  if (op == ReduceOp::kMean && size_ > 1) {
    if (type == DataType::kF32) divide<float>(buffer, count, size_);
    if (type == DataType::kF64) divide<double>(buffer, count, size_);
  }
}

void MpiCommunicator::broadcast(void* buffer, size_t count, DataType type, int root) {
  MIRRORED_MPI_CHECK(MPI_Bcast(buffer, checked_count(count), to_mpi(type), root, comm_));
}

void MpiCommunicator::allgather(const void* send, void* recv, size_t count, DataType type) {
  MIRRORED_MPI_CHECK(MPI_Allgather(send, checked_count(count), to_mpi(type), recv, checked_count(count),
                                   to_mpi(type), comm_));
}

void MpiCommunicator::barrier() { MIRRORED_MPI_CHECK(MPI_Barrier(comm_)); }

}  // namespace mirrored::comm
