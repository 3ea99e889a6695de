#include "sgemm_bound.h"

#include <time.h>

#include <algorithm>

#include "mirrored/kernels/kernels.h"

namespace mirrored::cli {

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double sgemm_gflops(double (*clock)()) {
  constexpr int64_t kSize = 512;
  Tensor a({kSize, kSize}), b({kSize, kSize}), c({kSize, kSize});
  for (int64_t i = 0; i < kSize * kSize; ++i) {
    a.data<float>()[i] = static_cast<float>(i % 7) * 0.25f;
    b.data<float>()[i] = static_cast<float>(i % 5) * 0.5f;
  }
  kernels::gemm(false, false, 1.0f, a, b, 0.0f, c);  // warm-up
  double best = 0.0;
  for (int round = 0; round < 5; ++round) {
    const double start = clock();
    int reps = 0;
    while (clock() - start < 0.1) {
      kernels::gemm(false, false, 1.0f, a, b, 0.0f, c);
      ++reps;
    }
    best = std::max(best, 2.0 * kSize * kSize * kSize * reps / (clock() - start) / 1e9);
  }
  return best;
}

double step_flops(nn::Model& model, int64_t batch) {
  double flops = 0.0;
  for (size_t i = 0; i < model.num_layers(); ++i)
    flops += model.layer(i).forward_flops(batch) * (i > 0 ? 3.0 : 2.0);
  return flops;
}

}  // namespace mirrored::cli
