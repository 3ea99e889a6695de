#pragma once
// One output row of the 2x2, stride 2, unpadded max pool (pool.cpp), shared with the
// kernel that normalises, pools and applies relu in one pass (batch_norm_pool_relu.cpp).
#include <algorithm>
#include <cstdint>

namespace mirrored::kernels::cpu {

// The common 2x2, stride 2, unpadded case: two input rows per output row, no clipping.
// One output row at a time, in a loop GCC vectorises: the even and odd columns come from
// de-interleaving loads. The same row-major scan with a strict '>' as the general loop
// (and the CUDA kernel), so the first maximum wins and a NaN never replaces the running
// maximum nor is replaced, exactly as there. A pairwise tournament (the larger of each
// row, then of the two) would differ: a NaN at the bottom left would hide the element
// after it. No branches: which element wins is data, and a mispredicted branch costs more
// than the whole comparison. std::max(best, v) is (best < v ? v : best), exactly "v wins
// when v > best"; the index follows the same comparison as a bit mask (with conditional
// operators GCC left a branch in the loop and did not vectorise it).
inline void max_pool2x2_row(const float* __restrict r0, const float* __restrict r1, int32_t base, int32_t w,
                            int32_t ow, float* __restrict out, int32_t* __restrict arg) {
  for (int32_t ox = 0; ox < ow; ++ox) {
    const int32_t at = base + 2 * ox;
    float best = r0[2 * ox];
    int32_t best_at = at;
    const auto take = [&](float v, int32_t v_at) {
      const int32_t wins = v > best ? -1 : 0;
      best = std::max(best, v);
      best_at = (v_at & wins) | (best_at & ~wins);
    };
    take(r0[2 * ox + 1], at + 1);
    take(r1[2 * ox], at + w);
    take(r1[2 * ox + 1], at + w + 1);
    out[ox] = best;
    arg[ox] = best_at;
  }
}

}  // namespace mirrored::kernels::cpu
