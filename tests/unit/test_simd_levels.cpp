// Every CPU kernel with SIMD clones (kernels/cpu/simd_dispatch.h) gives the same bits at
// every level this CPU runs: AVX-512, AVX2 and the SSE2 baseline. A run's numbers must not
// depend on the CPU it lands on: a job resumed on other nodes, or `reduction = invariant`
// over nodes of two kinds, reads values computed at another width. CI's machines have
// AVX-512, so without this test only the widest clones would ever run there. Also the
// MIRRORED_CPU_SIMD setting that picks a lower level (kernels.h, cpu_simd_level).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../../src/kernels/cpu/simd_level.h"
#include "gradcheck.h"
#include "mirrored/core/error.h"
#include "mirrored/kernels/exact_grid.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored {
namespace {

using kernels::cpu::SimdLevel;
using testing::random_tensor;

using Bytes = std::vector<unsigned char>;

Bytes bytes_of(const Tensor& t) {
  const auto* p = static_cast<const unsigned char*>(t.raw());
  return Bytes(p, p + t.bytes());
}
template <typename T>
Bytes bytes_of(const std::vector<T>& v) {
  const auto* p = reinterpret_cast<const unsigned char*>(v.data());
  return Bytes(p, p + v.size() * sizeof(T));
}

// A kernel run from fixed inputs: every output it writes, as bytes, in order.
struct KernelCase {
  std::string name;
  std::function<std::vector<Bytes>()> run;
};

// Restores the level in use when a test ends, whatever it set.
class SimdLevelScope {
 public:
  SimdLevelScope() : saved_(kernels::cpu::simd_level()) {}
  ~SimdLevelScope() { kernels::cpu::set_simd_level(saved_); }
  SimdLevelScope(const SimdLevelScope&) = delete;
  SimdLevelScope& operator=(const SimdLevelScope&) = delete;

 private:
  SimdLevel saved_;
};

std::vector<SimdLevel> levels_below_the_widest() {
  std::vector<SimdLevel> levels;
  for (SimdLevel level : {SimdLevel::kAvx2, SimdLevel::kBaseline})
    if (level < kernels::cpu::widest_simd_level()) levels.push_back(level);
  return levels;
}

// Odd extents: full vectors of every width and a tail; the transformer's shapes where a
// kernel takes another path at them (rows eight at a time, attention rows in place at
// T % 4 == 0 and head size 32, from copies otherwise).
std::vector<KernelCase> kernel_cases() {
  std::vector<KernelCase> cases;
  cases.push_back({"layer_norm_forward and backward", [] {
                     Rng rng(1);
                     const int64_t rows = 13, c = 37;
                     const Tensor x = random_tensor({rows, c}, rng, -3.0f, 3.0f), gamma = random_tensor({c}, rng),
                                  beta = random_tensor({c}, rng), dy = random_tensor({rows, c}, rng);
                     Tensor y({rows, c}), mean({rows}), rstd({rows}), dx({rows, c}), dgamma({c}), dbeta({c}), ws;
                     kernels::layer_norm_forward(x, gamma, beta, 1e-5f, y, mean, rstd);
                     kernels::layer_norm_backward(x, dy, gamma, mean, rstd, dx, dgamma, dbeta, ws);
                     return std::vector<Bytes>{bytes_of(y), bytes_of(mean), bytes_of(rstd), bytes_of(dx),
                                               bytes_of(dgamma), bytes_of(dbeta)};
                   }});
  cases.push_back({"add_layer_norm_forward and layer_norm_backward_add", [] {
                     Rng rng(2);
                     const int64_t rows = 11, c = 128;
                     const Tensor a = random_tensor({rows, c}, rng), b = random_tensor({rows, c}, rng),
                                  gamma = random_tensor({c}, rng), beta = random_tensor({c}, rng),
                                  dy = random_tensor({rows, c}, rng), dres = random_tensor({rows, c}, rng);
                     Tensor sum({rows, c}), y({rows, c}), mean({rows}), rstd({rows}), dx({rows, c}), dgamma({c}),
                         dbeta({c}), ws;
                     kernels::add_layer_norm_forward(a, b, gamma, beta, 1e-5f, sum, y, mean, rstd);
                     kernels::layer_norm_backward_add(sum, dy, gamma, mean, rstd, dres, dx, dgamma, dbeta, ws);
                     return std::vector<Bytes>{bytes_of(sum),  bytes_of(y),      bytes_of(mean), bytes_of(rstd),
                                               bytes_of(dx),   bytes_of(dgamma), bytes_of(dbeta)};
                   }});
  cases.push_back({"gelu_forward and backward", [] {
                     Rng rng(3);
                     const Tensor x = random_tensor({1003}, rng, -6.0f, 6.0f), dy = random_tensor({1003}, rng);
                     Tensor y({1003}), dx({1003});
                     kernels::gelu_forward(x, y);
                     kernels::gelu_backward(x, dy, dx);
                     return std::vector<Bytes>{bytes_of(y), bytes_of(dx)};
                   }});
  cases.push_back({"bias_gelu_forward and backward, float32 and bfloat16 outputs", [] {
                     Rng rng(4);
                     const int64_t rows = 9, c = 300;
                     const Tensor product = random_tensor({rows, c}, rng, -5.0f, 5.0f), bias = random_tensor({c}, rng),
                                  dy = random_tensor({rows, c}, rng);
                     Tensor h = product.clone(), th({rows, c}), y({rows, c}), dh({rows, c}), dbias({c});
                     kernels::bias_gelu_forward(h, bias, th, y);
                     kernels::bias_gelu_backward(h, th, dy, dh, dbias);
                     Tensor h16 = product.clone(), th16({rows, c}), y16({rows, c}, DType::kBF16),
                            dh16({rows, c}, DType::kBF16), dbias16({c});
                     kernels::bias_gelu_forward(h16, bias, th16, y16);
                     kernels::bias_gelu_backward(h16, th16, dy, dh16, dbias16);
                     return std::vector<Bytes>{bytes_of(h),   bytes_of(th),  bytes_of(y),   bytes_of(dh),
                                               bytes_of(dbias), bytes_of(y16), bytes_of(dh16), bytes_of(dbias16)};
                   }});
  for (const auto& [t, c, heads] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {64, 128, 4}, {65, 128, 4}, {19, 96, 4}}) {
    cases.push_back({"fused_attention_forward and backward, T " + std::to_string(t) + ", C " + std::to_string(c),
                     [t = t, c = c, heads = heads] {
                       Rng rng(static_cast<uint64_t>(5 + t));
                       const int64_t b = 2;
                       const Tensor qkv = random_tensor({b, t, 3 * c}, rng, -2.0f, 2.0f),
                                    dout = random_tensor({b, t, c}, rng);
                       Tensor out({b, t, c}), lse({b, heads, t}), dqkv({b, t, 3 * c}), ws;
                       kernels::fused_attention_forward(qkv, heads, out, lse);
                       kernels::fused_attention_backward(qkv, out, lse, dout, heads, dqkv, ws);
                       return std::vector<Bytes>{bytes_of(out), bytes_of(lse), bytes_of(dqkv)};
                     }});
  }
  cases.push_back({"softmax_cross_entropy and its mean", [] {
                     Rng rng(6);
                     const int64_t rows = 37, classes = 259;
                     const Tensor logits = random_tensor({rows, classes}, rng, -8.0f, 8.0f);
                     Tensor labels({rows}, DType::kI32);
                     for (int64_t i = 0; i < rows; ++i) labels.data<int32_t>()[i] = static_cast<int32_t>((i * 97) % classes);
                     Tensor dlogits({rows, classes}), dlogits_mean({rows, classes}), mean({1}), ws;
                     const kernels::CrossEntropyResult r = kernels::softmax_cross_entropy(logits, labels, &dlogits, 0.5f);
                     kernels::softmax_cross_entropy_mean(logits, labels, &dlogits_mean, 0.25f, mean, ws);
                     return std::vector<Bytes>{bytes_of(std::vector<double>{r.loss_sum}),
                                               bytes_of(std::vector<int64_t>{r.correct}), bytes_of(dlogits),
                                               bytes_of(dlogits_mean), bytes_of(mean)};
                   }});
  for (const bool decoupled : {false, true}) {
    cases.push_back({decoupled ? "adam_update (AdamW), clipped" : "adam_update (Adam)", [decoupled] {
                       Rng rng(7);
                       const int64_t n = 1031;
                       Tensor param = random_tensor({n}, rng), m = random_tensor({n}, rng, 0.0f, 0.1f),
                              v = random_tensor({n}, rng, 0.0f, 0.01f), factor({1});
                       const Tensor grad = random_tensor({n}, rng);
                       factor.data<float>()[0] = 0.75f;
                       kernels::AdamHyper hyper;
                       hyper.lr = 3e-3f;
                       hyper.weight_decay = 0.1f;
                       hyper.decoupled_weight_decay = decoupled;
                       for (int64_t step = 1; step <= 3; ++step)
                         kernels::adam_update(param, grad, m, v, hyper, step, nullptr, decoupled ? &factor : nullptr);
                       return std::vector<Bytes>{bytes_of(param), bytes_of(m), bytes_of(v)};
                     }});
  }
  cases.push_back({"round_to_bf16", [] {
                     Rng rng(8);
                     Tensor x = random_tensor({1003}, rng, -1e3f, 1e3f), out;
                     x.data<float>()[5] = std::numeric_limits<float>::quiet_NaN();
                     x.data<float>()[6] = std::numeric_limits<float>::infinity();
                     x.data<float>()[7] = 1e-40f;  // subnormal
                     kernels::round_to_bf16(x, out);
                     return std::vector<Bytes>{bytes_of(out)};
                   }});
  cases.push_back({"exact grid: largest, exponents, sums, rounding", [] {
                     // Three terms over two segments, magnitudes 2^-30 to 2^30, zeros and
                     // subnormals among them: the integer sums and the rounding back.
                     Rng rng(9);
                     const std::vector<size_t> offsets = {0, 517, 1031};
                     std::vector<std::vector<float>> terms(3);
                     for (auto& term : terms) {
                       const Tensor values = random_tensor({1031}, rng);
                       const Tensor scales = random_tensor({1031}, rng, -30.0f, 30.0f);
                       for (int64_t i = 0; i < 1031; ++i)
                         term.push_back(std::ldexp(values.data<float>()[i],
                                                   static_cast<int>(std::lround(scales.data<float>()[i]))));
                       term[3] = 0.0f;
                       term[4] = 3e-39f;
                     }
                     std::vector<const float*> pointers;
                     for (const auto& term : terms) pointers.push_back(term.data());
                     std::vector<uint32_t> largest(2);
                     std::vector<int32_t> exponents(2);
                     std::vector<int64_t> sums(1031);
                     std::vector<float> out(1031);
                     kernels::exact_grid_largest(terms[0].data(), offsets, largest.data(), Device::cpu());
                     kernels::exact_grid_exponents(pointers, offsets, exponents.data(), Device::cpu());
                     kernels::exact_grid_sums(pointers, offsets, exponents.data(), 3, sums.data(), Device::cpu());
                     kernels::exact_grid_round(sums.data(), nullptr, offsets, exponents.data(), 3, out.data(),
                                               Device::cpu());
                     return std::vector<Bytes>{bytes_of(largest), bytes_of(exponents), bytes_of(sums), bytes_of(out)};
                   }});
  return cases;
}

TEST(SimdLevels, EveryDispatchedKernelGivesTheWidestLevelsBitsAtEveryLevel) {
  const std::vector<SimdLevel> lower = levels_below_the_widest();
  if (lower.empty()) GTEST_SKIP() << "this CPU runs only the baseline clones: there is no other level to compare";
  SimdLevelScope restore;
  for (const KernelCase& kernel : kernel_cases()) {
    SCOPED_TRACE(kernel.name);
    kernels::cpu::set_simd_level(kernels::cpu::widest_simd_level());
    const std::vector<Bytes> widest = kernel.run();
    for (SimdLevel level : lower) {
      kernels::cpu::set_simd_level(level);
      const std::vector<Bytes> got = kernel.run();
      ASSERT_EQ(got.size(), widest.size());
      for (size_t output = 0; output < got.size(); ++output) {
        ASSERT_EQ(got[output].size(), widest[output].size());
        EXPECT_TRUE(got[output] == widest[output])
            << "output " << output << " differs at " << kernels::cpu::simd_level_name(level) << " from "
            << kernels::cpu::simd_level_name(kernels::cpu::widest_simd_level());
      }
    }
  }
}

// The exact sum's totals back to float at every level, against the scalar conversion (one
// rounding to nearest): AVX-512 converts int64 in vectors, AVX2 through two exact halves and a
// sum rounded to odd. The totals are whole int64s, not sums of a few terms: ties at float's
// precision one unit either side, and the values a rounding to double first would round
// twice (2^60 + 2^36 + 1), where a conversion through double to nearest gives another float.
TEST(SimdLevels, GridTotalsOfEveryMagnitudeRoundToFloatOnceAtEveryLevel) {
  std::vector<int64_t> totals = {0, 1, -1, (1 << 24) + 1, -((1 << 24) + 1), INT64_MAX, INT64_MIN + 1,
                                 (int64_t{1} << 62) - 1, -(int64_t{1} << 62)};
  std::mt19937_64 rng(10);
  for (int k = 25; k <= 62; ++k) {
    // m x 2^(k-24) is a float; half its last place above it is a tie, broken by +-1 and by m.
    for (int64_t m : {int64_t{1} << 23, (int64_t{1} << 23) + 1, (int64_t{1} << 24) - 1,
                      static_cast<int64_t>((rng() >> 41) | (uint64_t{1} << 23))}) {
      if (k == 62 && m >= (int64_t{1} << 23) + 1) continue;  // would leave int64
      const int64_t ulp = int64_t{1} << (k - 23), tie = (m << (k - 23)) + ulp / 2;
      for (int64_t d : {int64_t{-1}, int64_t{0}, int64_t{1}}) {
        totals.push_back(tie + d);
        totals.push_back(-(tie + d));
      }
    }
  }
  for (int i = 0; i < 4000; ++i) {
    const auto bits = static_cast<int64_t>(rng() >> 1) >> (rng() % 62);
    totals.push_back(rng() % 2 ? bits : -bits);
  }
  totals.push_back(int64_t{1} << 60 | int64_t{1} << 36 | 1);  // the double-rounding trap, named
  std::vector<float> want;
  for (const int64_t total : totals) want.push_back(static_cast<float>(total));
  // Exponent 51 on one term's headroom: the quantum is 2^0, so the result is the total itself.
  ASSERT_EQ(kernels::grid_quantum(51, 1), 0);
  const std::vector<size_t> offsets = {0, totals.size()};
  const std::vector<int32_t> exponents = {51};
  SimdLevelScope restore;
  for (SimdLevel level : {SimdLevel::kBaseline, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (level > kernels::cpu::widest_simd_level()) continue;
    kernels::cpu::set_simd_level(level);
    std::vector<float> out(totals.size());
    kernels::exact_grid_round(totals.data(), nullptr, offsets, exponents.data(), 1, out.data(), Device::cpu());
    for (size_t i = 0; i < totals.size(); ++i)
      ASSERT_EQ(std::memcmp(&out[i], &want[i], sizeof(float)), 0)
          << totals[i] << " rounded to " << out[i] << " at " << kernels::cpu::simd_level_name(level) << ", not "
          << want[i];
  }
}

// The level set is the one the dispatch reads (a level that did not take would let the test
// above compare the widest clone with itself) and the one kernels.h reports.
TEST(SimdLevels, TheLevelSetIsTheLevelInUseAndReported) {
  SimdLevelScope restore;
  for (SimdLevel level : {SimdLevel::kBaseline, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (level > kernels::cpu::widest_simd_level()) continue;
    kernels::cpu::set_simd_level(level);
    EXPECT_EQ(kernels::cpu::simd_level(), level);
    EXPECT_EQ(kernels::cpu_simd_level(), kernels::cpu::simd_level_name(level));
  }
}

TEST(SimdLevels, TheSettingNamesALevelTheCpuRuns) {
  const SimdLevel widest = kernels::cpu::widest_simd_level();
  EXPECT_EQ(kernels::cpu::simd_level_for(""), widest);
  EXPECT_EQ(kernels::cpu::simd_level_for("auto"), widest);
  EXPECT_EQ(kernels::cpu::simd_level_for("baseline"), SimdLevel::kBaseline);
  for (SimdLevel level : {SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    const std::string name = kernels::cpu::simd_level_name(level);
    if (level <= widest) {
      EXPECT_EQ(kernels::cpu::simd_level_for(name), level);
    } else {
      try {
        kernels::cpu::simd_level_for(name);
        ADD_FAILURE() << name << " accepted on a CPU that runs at most " << kernels::cpu::simd_level_name(widest);
      } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("this CPU runs at most"), std::string::npos) << e.what();
      }
    }
  }
  try {
    kernels::cpu::simd_level_for("sse4");
    ADD_FAILURE() << "sse4 accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "MIRRORED_CPU_SIMD=sse4: expected auto, avx512, avx2 or baseline");
  }
}

}  // namespace
}  // namespace mirrored
