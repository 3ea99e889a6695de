#pragma once
// Values a kernel forms in float32 but hands on only in bfloat16, as the operands of bf16
// products, are formed a few rows at a time into a float32 block that stays in the
// first-level cache and rounded from there: the bits of writing them in float32 and
// rounding them in a pass of their own (round_to_bf16_bits), without the float32 copy
// going through memory and back.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "cpu_kernels.h"

namespace mirrored::kernels::cpu {

constexpr int64_t kRoundedBlockFloats = 4096;  // 16 KB

// `form_rows(block, first, n)` writes rows [first, first + n), `cols` floats each, to block;
// they reach `out` rounded. Rows are formed in order, so sums a kernel carries from row to
// row run as they would over the whole.
template <typename FormRows>
void rounded_in_blocks(int64_t rows, int64_t cols, uint16_t* out, FormRows form_rows) {
  const int64_t per_block = std::max<int64_t>(1, kRoundedBlockFloats / std::max<int64_t>(cols, 1));
  thread_local std::vector<float> block;
  block.resize(static_cast<size_t>(std::min(per_block, std::max<int64_t>(rows, 1)) * cols));
  for (int64_t first = 0; first < rows; first += per_block) {
    const int64_t n = std::min(per_block, rows - first);
    form_rows(block.data(), first, n);
    round_to_bf16_bits(block.data(), out + first * cols, n * cols);
  }
}

}  // namespace mirrored::kernels::cpu
