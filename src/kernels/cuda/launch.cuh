#pragma once
// Launch shapes shared by the element-wise kernels: grid-stride loops over 256-thread
// blocks, the grid capped so huge buffers reuse blocks instead of launching millions.
#include <cstdint>

namespace mirrored::kernels::cuda {

constexpr int kThreads = 256;

inline unsigned grid_for(int64_t n) {
  constexpr int64_t kMaxBlocks = 4096;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

#define MIRRORED_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{blockDim.x} * gridDim.x)

}  // namespace mirrored::kernels::cuda
