#pragma once
// The bound a step is set against in `bench layers` and `bench train`: the matrix-product
// FLOPs of one forward and backward, at this machine's single-process sgemm rate.
#include <cstdint>

#include "mirrored/nn/model.h"
#include "mirrored/nn/part_timer.h"

namespace mirrored::cli {

// This process's CPU time (all its threads, user + system), in seconds.
double process_cpu_seconds();

// Best of several timed runs of a 512 x 512 x 512 sgemm at the CPU threads set, in GFLOP/s,
// timed on `clock` (seconds): wall time, or process_cpu_seconds.
double sgemm_gflops(double (*clock)() = nn::wall_seconds);
// The same for the bfloat16 product (kernels::gemm with Precision::kBF16, float32 sums) of
// operands rounded once beforehand, as a bf16 layer rounds each operand once: the rate a
// bf16 step's products can reach on this CPU (native where cpu_bf16_runs_native()).
double bf16_gemm_gflops(double (*clock)() = nn::wall_seconds);

// FLOPs of one forward and backward of `model` on `batch` samples: each layer's forward
// products (Layer::forward_flops) three times (forward, weight gradient, input gradient),
// twice for the first layer, whose input gradient is not formed.
double step_flops(nn::Model& model, int64_t batch);

}  // namespace mirrored::cli
