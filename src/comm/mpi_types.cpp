#include "mirrored/comm/mpi_types.h"

#include <climits>
#include <cstdint>

#include "mirrored/comm/failure/mpi_check.h"
#include "mirrored/core/bf16.h"

namespace mirrored::comm {
namespace {
// Sum pairs in float32 and round back to bfloat16, as the wire format wants.
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = float_to_bf16(bf16_to_float(a[i]) + bf16_to_float(b[i]));
}

MPI_Op bf16_sum_op() {
  // Created once, by whichever thread gets here first; MPI frees it at MPI_Finalize.
  static const MPI_Op op = [] {
    MPI_Op created;
    MIRRORED_MPI_CHECK(MPI_Op_create(&bf16_sum, /*commute=*/1, &created));
    return created;
  }();
  return op;
}

bool is_floating(DataType type) {
  return type == DataType::kF32 || type == DataType::kF64 || type == DataType::kBF16;
}

}  // namespace

MPI_Datatype mpi_datatype(DataType type) {
  switch (type) {
    case DataType::kF32: return MPI_FLOAT;
    case DataType::kF64: return MPI_DOUBLE;
    case DataType::kI32: return MPI_INT32_T;
    case DataType::kI64: return MPI_INT64_T;
    case DataType::kU8: return MPI_UINT8_T;
    case DataType::kBF16: return MPI_UINT16_T;  // reduced by bf16_sum_op()
  }
  MIRRORED_CHECK(false, "unknown data type");
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_reduce_op(DataType type, ReduceOp op) {
  MIRRORED_CHECK(op != ReduceOp::kMean || is_floating(type), "mean all-reduce of ", datatype_name(type));
  if (type == DataType::kBF16) {
    MIRRORED_CHECK(op == ReduceOp::kSum || op == ReduceOp::kMean, "bfloat16 all-reduce supports sum and mean only");
    return bf16_sum_op();
  }
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kMean: return MPI_SUM;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kMin: return MPI_MIN;
  }
  MIRRORED_CHECK(false, "unknown reduce op");
  return MPI_OP_NULL;
}

int mpi_count(size_t count) {
  MIRRORED_CHECK(count <= static_cast<size_t>(INT_MAX), "collective of ", count,
                 " elements exceeds MPI's int count");
  return static_cast<int>(count);
}

}  // namespace mirrored::comm
