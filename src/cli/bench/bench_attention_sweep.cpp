// The attention core's context sweep (bench_attention_sweep.h): random q, k, v of the
// model's width and heads, timed forward and backward, the median of `steps` runs after
// one warm-up, for the fused kernels and for the materialised ones side by side.
#include "bench_attention_sweep.h"

#include <algorithm>
#include <string>
#include <vector>

#include "mirrored/core/log.h"
#include "mirrored/core/rng.h"
#include "mirrored/core/strings.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored::cli {
namespace {

struct CoreTimes {
  double forward = 0.0, backward = 0.0;
};

std::string pad_left(const std::string& text, size_t width) {
  return text.size() >= width ? text : std::string(width - text.size(), ' ') + text;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class Forward, class Backward>
CoreTimes time_core(int steps, double (*clock)(), Forward&& forward, Backward&& backward) {
  std::vector<double> f, b;
  for (int step = 0; step <= steps; ++step) {
    const double start = clock();
    forward();
    const double forward_done = clock();
    backward();
    const double backward_done = clock();
    if (step == 0) continue;  // warm-up: first touch of the buffers
    f.push_back(forward_done - start);
    b.push_back(backward_done - forward_done);
  }
  return {median_of(f), median_of(b)};
}

}  // namespace

void print_attention_context_sweep(int64_t width, int64_t heads, int64_t tokens_per_step, int steps,
                                   double sgemm_gflops, double (*clock)()) {
  chief_print(str_cat("  attention core by context (width ", width, ", ", heads, " heads, ~", tokens_per_step,
                      " tokens a step; FLOPs of the causal half, f+b = 3 x forward)"));
  chief_print("  context  batch  fused_fwd_ms  fused_bwd_ms  GFLOP/s  %sgemm  materialised_ms  speedup");
  for (const int64_t t : {64, 256, 1024}) {
    const int64_t b = std::max<int64_t>(1, tokens_per_step / t);
    Rng rng(static_cast<uint64_t>(t));
    Tensor qkv({b, t, 3 * width}), dout({b, t, width});
    for (int64_t i = 0; i < qkv.numel(); ++i) qkv.data<float>()[i] = rng.uniform(-1.0f, 1.0f);
    for (int64_t i = 0; i < dout.numel(); ++i) dout.data<float>()[i] = rng.uniform(-1.0f, 1.0f);
    Tensor out({b, t, width}), lse({b, heads, t}), dqkv(qkv.shape()), workspace;
    const CoreTimes fused = time_core(
        steps, clock, [&] { kernels::fused_attention_forward(qkv, heads, out, lse); },
        [&] { kernels::fused_attention_backward(qkv, out, lse, dout, heads, dqkv, workspace); });
    Tensor probs({b, heads, t, t});
    const CoreTimes materialised = time_core(
        steps, clock, [&] { kernels::attention_forward(qkv, heads, out, probs); },
        [&] { kernels::attention_backward(qkv, probs, dout, heads, dqkv, workspace); });
    // Per head: q k^T and p v over t (t + 1) / 2 pairs, 2 FLOPs per multiply-add.
    const double forward_flops = 2.0 * 2.0 * static_cast<double>(b * t * (t + 1) / 2) * static_cast<double>(width);
    const double fused_s = fused.forward + fused.backward;
    const double materialised_s = materialised.forward + materialised.backward;
    const double rate = 3.0 * forward_flops / fused_s / 1e9;
    chief_print(str_cat("  ", pad_left(std::to_string(t), 7), "  ", pad_left(std::to_string(b), 5), "  ",
                        pad_left(fixed(fused.forward * 1e3, 3), 12), "  ", pad_left(fixed(fused.backward * 1e3, 3), 12),
                        "  ", pad_left(fixed(rate, 1), 7), "  ", pad_left(fixed(100.0 * rate / sgemm_gflops, 1), 6),
                        "  ", pad_left(fixed(materialised_s * 1e3, 3), 15), "  ",
                        pad_left(fixed(materialised_s / fused_s, 2), 7)));
  }
}

}  // namespace mirrored::cli
