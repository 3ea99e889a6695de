#include "mirrored/comm/local_communicator.h"

#include <cstring>

#ifdef MIRRORED_WITH_CUDA
#include <cuda_runtime.h>
#endif

#include "mirrored/core/cuda_memory.h"
#include "mirrored/core/error.h"

namespace mirrored::comm {
namespace {
#ifdef MIRRORED_WITH_CUDA
bool on_device(const void* ptr) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    (void)cudaGetLastError();  // an unregistered host pointer
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}
#endif

// The one data movement of a world of one. Device buffers were written by kernels on the
// compute stream: wait for them, then copy synchronously (a rare path: out-of-place
// reduce-scatters and all-gathers have nothing to exchange in a world of one).
void copy_bytes(void* dst, const void* src, size_t bytes) {
  if (dst == src || bytes == 0) return;
#ifdef MIRRORED_WITH_CUDA
  if (on_device(dst) || on_device(src)) {
    if (cudaDeviceSynchronize() != cudaSuccess) (void)cudaGetLastError();
    cuda_copy(dst, src, bytes);
    return;
  }
#endif
  std::memmove(dst, src, bytes);
}
}  // namespace

void LocalCommunicator::allreduce(void*, size_t, DataType type, ReduceOp op) {
  MIRRORED_CHECK(op != ReduceOp::kMean || type == DataType::kF32 || type == DataType::kF64 ||
                     type == DataType::kBF16,
                 "mean all-reduce of ", datatype_name(type));
}

void LocalCommunicator::sendrecv(const void* send, size_t send_count, int dest, void* recv, size_t recv_count,
                                 int source, DataType type) {
  MIRRORED_CHECK(dest == 0 && source == 0 && send_count == recv_count, "sendrecv to rank ", dest, " from rank ",
                 source, " (", send_count, " and ", recv_count, " elements) in a world of 1");
  copy_bytes(recv, send, send_count * datatype_size(type));
}

void LocalCommunicator::broadcast(void*, size_t, DataType, int root) {
  MIRRORED_CHECK(root == 0, "broadcast root ", root, " in a world of 1");
}

void LocalCommunicator::allgather(const void* send, void* recv, size_t count, DataType type) {
  copy_bytes(recv, send, count * datatype_size(type));
}

std::unique_ptr<Work> LocalCommunicator::reduce_scatter_async(const void* send, void* recv,
                                                             const std::vector<size_t>& counts, DataType type,
                                                             ReduceOp op) {
  MIRRORED_CHECK(counts.size() == 1, "reduce-scatter with ", counts.size(), " counts in a world of 1");
  allreduce(nullptr, 0, type, op);  // the same checks of the operation
  copy_bytes(recv, send, counts[0] * datatype_size(type));
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
