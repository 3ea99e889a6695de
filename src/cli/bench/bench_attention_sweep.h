#pragma once
// `mirrored bench layers` for a gpt: the attention core alone at contexts 64, 256 and 1024
// (batch scaled to keep the tokens per step), fused against the materialised kernels.
#include <cstdint>

namespace mirrored::cli {

// Prints one table. FLOPs are the causal half only (query t against keys <= t): forward
// q k^T and p v, backward twice that; `sgemm_gflops` is the machine's rate to compare with,
// measured on `clock` (seconds: the process's CPU time or the wall clock), which times the
// kernels too.
void print_attention_context_sweep(int64_t width, int64_t heads, int64_t tokens_per_step, int steps,
                                   double sgemm_gflops, double (*clock)());

}  // namespace mirrored::cli
