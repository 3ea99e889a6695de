#pragma once
// kMean for backends that sum on the wire (MPI, and NCCL's staged host buffers): the sum
// over ranks, then one multiplication by the reciprocal of the rank count, as NCCL's device
// buffers get it (kernels::scale by 1.0f / ranks), so every backend rounds the same way.
// x * (1/n) is not x / n: the two can differ in the last bit, and this is the one computed.
#include <cstddef>

#include "mirrored/comm/communicator.h"

namespace mirrored::comm {

// For op kMean and ranks > 1 (otherwise nothing): each element of the summed host buffer
// times T(1) / T(ranks), with T the element type (f32, f64); bf16 elements are widened to
// float, multiplied by 1.0f / ranks and rounded back to bf16 (nearest even).
void mean_from_sum(void* buffer, size_t count, DataType type, ReduceOp op, int ranks);

}  // namespace mirrored::comm
