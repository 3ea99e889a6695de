#include "sgemm_bound.h"

#include <time.h>

#include <algorithm>
#include <utility>

#include "mirrored/kernels/kernels.h"

namespace mirrored::cli {

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

namespace {
constexpr int64_t kSize = 512;  // the timed product is kSize^3

// Best of five 0.1 s rounds of c = a b in `precision`, in GFLOP/s on `clock`.
double gemm_gflops(const Tensor& a, const Tensor& b, Precision precision, double (*clock)()) {
  Tensor c({kSize, kSize});
  kernels::gemm(false, false, 1.0f, a, b, 0.0f, c, precision);  // warm-up
  double best = 0.0;
  for (int round = 0; round < 5; ++round) {
    const double start = clock();
    int reps = 0;
    while (clock() - start < 0.1) {
      kernels::gemm(false, false, 1.0f, a, b, 0.0f, c, precision);
      ++reps;
    }
    best = std::max(best, 2.0 * kSize * kSize * kSize * reps / (clock() - start) / 1e9);
  }
  return best;
}

// The operands of the timed product: small integers times powers of two, exact in bfloat16.
std::pair<Tensor, Tensor> bound_operands() {
  Tensor a({kSize, kSize}), b({kSize, kSize});
  for (int64_t i = 0; i < kSize * kSize; ++i) {
    a.data<float>()[i] = static_cast<float>(i % 7) * 0.25f;
    b.data<float>()[i] = static_cast<float>(i % 5) * 0.5f;
  }
  return {std::move(a), std::move(b)};
}
}  // namespace

double sgemm_gflops(double (*clock)()) {
  const auto [a, b] = bound_operands();
  return gemm_gflops(a, b, Precision::kF32, clock);
}

double bf16_gemm_gflops(double (*clock)()) {
  const auto [a, b] = bound_operands();
  Tensor a16, b16;
  kernels::round_to_bf16(a, a16);
  kernels::round_to_bf16(b, b16);
  return gemm_gflops(a16, b16, Precision::kBF16, clock);
}

double step_flops(nn::Model& model, int64_t batch) {
  double flops = 0.0;
  for (size_t i = 0; i < model.num_layers(); ++i)
    flops += model.layer(i).forward_flops(batch) * (i > 0 ? 3.0 : 2.0);
  return flops;
}

}  // namespace mirrored::cli
