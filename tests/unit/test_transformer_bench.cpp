// Throughput of one GPT training step (forward, loss, backward) on the CPU at nanoGPT's CPU
// recipe: 4 layers, 4 heads, width 128, context 64, batch 12, character vocabulary (65),
// one thread. It measures and prints; it asserts nothing, so it is disabled in the suite:
//   OPENBLAS_NUM_THREADS=1 ./build/tests/unit_tests --gtest_also_run_disabled_tests \
//       --gtest_filter='TransformerBench.*'
// tests/bench/gpt_step_pytorch.py times the same step in PyTorch. The Bf16 variants run the
// same step with precision = bf16 (core/precision.h); the Wide ones a matrix-bound shape
// (width 512, 8 heads, context 128, batch 8).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/builders.h"
#include "mirrored/nn/loss.h"

namespace mirrored {
namespace {

nn::GptSpec nano_gpt() {
  nn::GptSpec spec;
  spec.vocab = 65;
  spec.context = 64;
  spec.width = 128;
  spec.heads = 4;
  spec.layers = 4;
  return spec;
}

nn::GptSpec wide_gpt() {
  nn::GptSpec spec = nano_gpt();
  spec.context = 128;
  spec.width = 512;
  spec.heads = 8;
  return spec;
}

void time_gpt_step(const nn::GptSpec& spec, int64_t batch, Precision precision) {
  kernels::set_cpu_threads(1);
  const int64_t rows = batch * spec.context;
  nn::Model model = nn::gpt(spec);
  model.build({spec.context});
  model.initialize(1);
  model.set_precision(precision);
  Rng rng(2);
  Tensor tokens({batch, spec.context}, DType::kI32), targets({rows}, DType::kI32);
  for (int64_t i = 0; i < rows; ++i) {
    tokens.data<int32_t>()[i] = static_cast<int32_t>(rng.below(spec.vocab));
    targets.data<int32_t>()[i] = static_cast<int32_t>(rng.below(spec.vocab));
  }
  nn::CrossEntropyLoss criterion;
  auto step = [&] {
    const Tensor& logits = model.forward(tokens, nn::Mode::kTrain);
    criterion.forward(logits.reshape({rows, spec.vocab}), targets, true);
    model.parameters().zero_grads();
    model.backward(criterion.grad().reshape({batch, spec.context, spec.vocab}));
  };
  constexpr int kWarmup = 3, kSteps = 30;
  for (int i = 0; i < kWarmup; ++i) step();
  std::vector<double> ms;
  for (int i = 0; i < kSteps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    step();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  double mean = 0.0;
  for (double m : ms) mean += m / kSteps;
  std::printf("gpt cpu step (fwd+bwd) %s L=%lld H=%lld C=%lld T=%lld B=%lld threads=%d: mean %.2f ms, median %.2f ms, "
              "%.0f tokens/s (median)\n",
              precision_name(precision), static_cast<long long>(spec.layers), static_cast<long long>(spec.heads),
              static_cast<long long>(spec.width), static_cast<long long>(spec.context),
              static_cast<long long>(batch), kernels::cpu_threads(), mean, ms[ms.size() / 2],
              static_cast<double>(rows) / (ms[ms.size() / 2] / 1000.0));
}

TEST(TransformerBench, DISABLED_NanoGptCpuStep) { time_gpt_step(nano_gpt(), 12, Precision::kF32); }
TEST(TransformerBench, DISABLED_NanoGptCpuStepBf16) { time_gpt_step(nano_gpt(), 12, Precision::kBF16); }
TEST(TransformerBench, DISABLED_WideGptCpuStep) { time_gpt_step(wide_gpt(), 8, Precision::kF32); }
TEST(TransformerBench, DISABLED_WideGptCpuStepBf16) { time_gpt_step(wide_gpt(), 8, Precision::kBF16); }

}  // namespace
}  // namespace mirrored
