#include "mirrored/comm/local_communicator.h"

#include <cstring>

#include "mirrored/core/error.h"

namespace mirrored::comm {

void LocalCommunicator::allreduce(void*, size_t, DataType type, ReduceOp op) {
  MIRRORED_CHECK(op != ReduceOp::kMean || type == DataType::kF32 || type == DataType::kF64 ||
                     type == DataType::kBF16,
                 "mean all-reduce of ", datatype_name(type));
}

void LocalCommunicator::broadcast(void*, size_t, DataType, int root) {
  MIRRORED_CHECK(root == 0, "broadcast root ", root, " in a world of 1");
}

void LocalCommunicator::allgather(const void* send, void* recv, size_t count, DataType type) {
  if (send != recv) std::memmove(recv, send, count * datatype_size(type));
}

std::unique_ptr<Work> LocalCommunicator::reduce_scatter_async(const void* send, void* recv,
                                                             const std::vector<size_t>& counts, DataType type,
                                                             ReduceOp op) {
  MIRRORED_CHECK(counts.size() == 1, "reduce-scatter with ", counts.size(), " counts in a world of 1");
  allreduce(nullptr, 0, type, op);  // the same checks of the operation
  if (send != recv) std::memmove(recv, send, counts[0] * datatype_size(type));
  return completed_work();
}

std::unique_ptr<Work> LocalCommunicator::reduce_scatter_inplace_async(void*, const std::vector<size_t>& counts,
                                                                     DataType type, ReduceOp op) {
  MIRRORED_CHECK(counts.size() == 1, "reduce-scatter with ", counts.size(), " counts in a world of 1");
  allreduce(nullptr, 0, type, op);
  return completed_work();
}

std::unique_ptr<Work> LocalCommunicator::allgather_inplace_async(void*, const std::vector<size_t>& counts,
                                                                 DataType) {
  MIRRORED_CHECK(counts.size() == 1, "all-gather with ", counts.size(), " counts in a world of 1");
  return completed_work();
}

}  // namespace mirrored::comm
