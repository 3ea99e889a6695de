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

}  // namespace mirrored::comm
