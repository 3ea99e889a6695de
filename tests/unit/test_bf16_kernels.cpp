// bf16 products and convolutions on the CPU (core/precision.h), each implementation called
// directly: against the float32 result within the bound of bf16_bounds.h, and against
// float32 arithmetic on inputs rounded beforehand (which is what bf16 inputs with float32
// accumulation mean) within float32 accumulation error.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <utility>
#include <cmath>
#include <limits>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "../../src/kernels/cpu/bf16_backends.h"
#include "../../src/kernels/cpu/conv_backends.h"
#include "bf16_bounds.h"
#include "mirrored/core/bf16.h"
#include "mirrored/core/error.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored {
namespace {

using kernels::ConvShape;
using kernels::cpu::Bf16Gemm;
using kernels::cpu::ConvBackend;
using namespace testing;

std::vector<float> random_vector(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& e : v) e = u(rng);
  return v;
}

// MKL's version, or "" where its runtime does not load here (MIRRORED_MKL_LIBRARY or
// libmkl_rt on the library path: `pip install mkl`), with the reason in `why`.
std::string mkl_version(std::string* why = nullptr) {
  try {
    return kernels::cpu::mkl_bf16_version();
  } catch (const InputError& e) {
    if (why) *why = e.what();
    return "";
  }
}

std::vector<Bf16Gemm> gemm_backends() {
  std::vector<Bf16Gemm> backends = {Bf16Gemm::kRounded};
  // oneDNN's bf16 matmul needs AVX-512 at least; where the CPU multiplies bf16 natively it is the one used.
  if (kernels::cpu::onednn_built() && kernels::cpu::native_bf16()) backends.push_back(Bf16Gemm::kOneDnn);
  // MKL emulates bf16 on CPUs without it, so it runs wherever it loads.
  if (!mkl_version().empty()) backends.push_back(Bf16Gemm::kMkl);
  return backends;
}

const char* name_of(Bf16Gemm backend) {
  switch (backend) {
    case Bf16Gemm::kOneDnn:
      return "onednn";
    case Bf16Gemm::kMkl:
      return "mkl";
    case Bf16Gemm::kRounded:
      break;
  }
  return "rounded";
}

void bf16_gemm(Bf16Gemm backend, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
               kernels::cpu::Bf16Operand a, int64_t lda, kernels::cpu::Bf16Operand b, int64_t ldb, float beta, float* c,
               int64_t ldc) {
  if (backend == Bf16Gemm::kOneDnn)
    kernels::cpu::onednn_gemm_bf16(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else if (backend == Bf16Gemm::kMkl)
    kernels::cpu::mkl_gemm_bf16(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    kernels::cpu::rounded_gemm_bf16(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

TEST(Bf16Gemm, MklIsInTheBackendsWhereItsRuntimeLoads) {
  std::string why;
  const std::string version = mkl_version(&why);
  if (version.empty()) GTEST_SKIP() << "MKL's bf16 GEMM is not tested here: " << why;
  EXPECT_NE(version.find("Math Kernel Library"), std::string::npos) << version;
  const auto backends = gemm_backends();
  EXPECT_NE(std::find(backends.begin(), backends.end(), Bf16Gemm::kMkl), backends.end());
}

TEST(Bf16Gemm, AnMklThatDoesNotLoadIsNamedWithWhatWasExpected) {
  try {
    kernels::cpu::load_mkl_bf16("/nonexistent/libmkl_rt.so.3");
    FAIL() << "a missing library loaded";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("MIRRORED_CPU_BF16=mkl: could not load MKL: /nonexistent/libmkl_rt.so.3"),
              std::string::npos) << what;
    EXPECT_NE(what.find("pip install mkl"), std::string::npos) << what;
  }
  // A library that loads but is not MKL's runtime.
  try {
    kernels::cpu::load_mkl_bf16("libm.so.6");
    FAIL() << "libm passed for MKL";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("MIRRORED_CPU_BF16=mkl: libm.so.6 has no MKL_Set_Interface_Layer"),
              std::string::npos) << e.what();
  }
}

TEST(Bf16Gemm, MatchesFloat32WithinTheRoundingBoundForEveryTransposeAndBackend) {
  const int64_t m = 37, n = 29, k = 300;
  for (const Bf16Gemm backend : gemm_backends())
    for (const bool ta : {false, true})
      for (const bool tb : {false, true}) {
        SCOPED_TRACE(std::string(name_of(backend)) + " ta " +
                     std::to_string(ta) + " tb " + std::to_string(tb));
        std::mt19937 rng(3);
        // Row strides wider than the rows: the padding must be skipped, not read.
        const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 2;
        const auto a = random_vector(static_cast<size_t>((ta ? k : m) * lda), rng);
        const auto b = random_vector(static_cast<size_t>((tb ? n : k) * ldb), rng);
        const auto c0 = random_vector(static_cast<size_t>(m * ldc), rng);

        std::vector<float> f32(c0.size()), scale(c0.size()), exact(c0.size()), got(c0.size());
        kernels::cpu::gemm(ta, tb, m, n, k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, f32.data(), ldc);
        const auto abs_a = absolute(a), abs_b = absolute(b);
        kernels::cpu::gemm(ta, tb, m, n, k, 1.0f, abs_a.data(), lda, abs_b.data(), ldb, 0.0f, scale.data(), ldc);
        const auto ra = rounded_bf16(a), rb = rounded_bf16(b);
        kernels::cpu::gemm(ta, tb, m, n, k, 1.0f, ra.data(), lda, rb.data(), ldb, 0.0f, exact.data(), ldc);

        bf16_gemm(backend, ta, tb, m, n, k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, got.data(), ldc);
        const double worst = expect_within(got, f32, scale, bf16_vs_f32_bound(k), "bf16 vs fp32");
        expect_within(got, exact, scale, f32_accumulation_bound(k), "bf16 vs rounded inputs");
        EXPECT_TRUE(any_differs(got, f32)) << "no element changed: the inputs were not rounded";
        EXPECT_GT(worst, 0.01) << "far inside the bound: is it the right bound?";

        // alpha and beta: c = 0.5 op(a) op(b) + c0, c0 read at full float32 precision.
        std::vector<float> c = c0, want(c0.size()), allowance(c0.size());
        bf16_gemm(backend, ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 1.0f, c.data(), ldc);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            const size_t e = static_cast<size_t>(i * ldc + j);
            want[e] = 0.5f * exact[e] + c0[e];
            allowance[e] = 0.5f * scale[e] + std::fabs(c0[e]);
          }
        std::vector<float> got_block, want_block, allowance_block;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            const size_t e = static_cast<size_t>(i * ldc + j);
            got_block.push_back(c[e]);
            want_block.push_back(want[e]);
            allowance_block.push_back(allowance[e]);
          }
        expect_within(got_block, want_block, allowance_block, f32_accumulation_bound(k + 2), "alpha 0.5, beta 1");
        // The row padding of c is left alone.
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = n; j < ldc; ++j) EXPECT_EQ(c[static_cast<size_t>(i * ldc + j)], c0[static_cast<size_t>(i * ldc + j)]);
      }
}

// Operands rounded before the product (a layer's input, weight and output gradient, each
// rounded once for its two products) give every backend the bits of rounding in the product,
// with padded row strides, either operand or both.
TEST(Bf16Gemm, OperandsRoundedBeforeGiveTheBitsOfOperandsRoundedInTheProduct) {
  const int64_t m = 33, n = 70, k = 129;
  for (const Bf16Gemm backend : gemm_backends())
    for (const bool ta : {false, true})
      for (const bool tb : {false, true}) {
        SCOPED_TRACE(std::string(name_of(backend)) + " ta " + std::to_string(ta) + " tb " + std::to_string(tb));
        std::mt19937 rng(11);
        const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n;
        const auto a = random_vector(static_cast<size_t>((ta ? k : m) * lda), rng);
        const auto b = random_vector(static_cast<size_t>((tb ? n : k) * ldb), rng);
        const auto c0 = random_vector(static_cast<size_t>(m * ldc), rng);
        std::vector<uint16_t> a16(a.size()), b16(b.size());
        kernels::cpu::round_to_bf16_bits(a.data(), a16.data(), static_cast<int64_t>(a.size()));
        kernels::cpu::round_to_bf16_bits(b.data(), b16.data(), static_cast<int64_t>(b.size()));

        std::vector<float> want = c0;
        bf16_gemm(backend, ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 1.0f, want.data(), ldc);
        EXPECT_TRUE(any_differs(want, c0)) << "the product wrote nothing";
        const std::vector<std::pair<kernels::cpu::Bf16Operand, kernels::cpu::Bf16Operand>> cases = {
            {a16.data(), b.data()}, {a.data(), b16.data()}, {a16.data(), b16.data()}};
        for (size_t i = 0; i < cases.size(); ++i) {
          std::vector<float> got = c0;
          bf16_gemm(backend, ta, tb, m, n, k, 0.5f, cases[i].first, lda, cases[i].second, ldb, 1.0f, got.data(), ldc);
          for (size_t e = 0; e < got.size(); ++e)
            ASSERT_EQ(std::bit_cast<uint32_t>(got[e]), std::bit_cast<uint32_t>(want[e]))
                << "case " << i << " (a rounded before, b, both), element " << e;
        }
      }
}

// Through the checked entry point: a bfloat16 tensor stands for its float32 original in a
// bf16 product, and is refused where it cannot be one.
TEST(Bf16Gemm, Bf16TensorsInGemmAreTheirOriginalsRoundedAndOnlyInBf16Products) {
  std::mt19937 rng(5);
  Tensor x({24, 40}), w({56, 40});
  const auto xv = random_vector(static_cast<size_t>(x.numel()), rng), wv = random_vector(static_cast<size_t>(w.numel()), rng);
  std::copy(xv.begin(), xv.end(), x.data<float>());
  std::copy(wv.begin(), wv.end(), w.data<float>());
  Tensor x16, w16;
  kernels::round_to_bf16(x, x16);
  kernels::round_to_bf16(w, w16);
  ASSERT_EQ(x16.dtype(), DType::kBF16);
  ASSERT_EQ(x16.shape(), x.shape());
  for (int64_t i = 0; i < x.numel(); ++i)
    ASSERT_EQ(x16.data<uint16_t>()[i], float_to_bf16(x.data<float>()[i])) << "element " << i;
  Tensor want({24, 56}), got({24, 56});
  kernels::gemm(false, true, 1.0f, x, w, 0.0f, want, Precision::kBF16);
  kernels::gemm(false, true, 1.0f, x16, w16, 0.0f, got, Precision::kBF16);
  for (int64_t i = 0; i < want.numel(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(got.data<float>()[i]), std::bit_cast<uint32_t>(want.data<float>()[i])) << i;
  try {
    kernels::gemm(false, true, 1.0f, x16, w, 0.0f, got, Precision::kF32);
    FAIL() << "a bfloat16 operand in a float32 product was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gemm: bfloat16 operands need precision bf16 on the CPU (fp32 on cpu"),
              std::string::npos) << e.what();
  }
}

TEST(Bf16Gemm, RoundingIsToNearestEvenAndKeepsSpecialValues) {
  std::vector<float> x = {1.0f, 1.0f + 1.0f / 256, 1.0f + 3.0f / 256, 1.0f + 1.0f / 512, -2.5f, 0.0f,
                          std::numeric_limits<float>::infinity()};
  std::vector<float> y(x.size());
  kernels::cpu::round_to_bf16(x.data(), y.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], 1.0f);                  // halfway between 1 and 1 + 2^-7: to the even one
  EXPECT_EQ(y[2], 1.0f + 4.0f / 256);     // halfway between 1 + 2^-7 and 1 + 2^-6: to the even one
  EXPECT_EQ(y[3], 1.0f);
  EXPECT_EQ(y[4], -2.5f);
  EXPECT_EQ(y[5], 0.0f);
  EXPECT_EQ(y[6], std::numeric_limits<float>::infinity());
}

TEST(Bf16Gemm, RowRoundingMatchesTheScalarDefinitionBitForBit) {
  // Random bit patterns cover every exponent, denormals, infinities and NaNs; the rows are
  // 37 wide in a stride of 40, so both the 16-lane loop and its tail run, and the gaps stay.
  std::mt19937 rng(13);
  const int64_t rows = 300, cols = 37, ld = 40;
  std::vector<float> x(static_cast<size_t>(rows * ld));
  for (auto& v : x) v = float_from_bits(static_cast<uint32_t>(rng()));
  const float specials[] = {0.0f, -0.0f, 1.0f + 1.0f / 256, std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                            float_from_bits(0x7f800001u), std::numeric_limits<float>::denorm_min(),
                            std::numeric_limits<float>::max()};
  for (size_t j = 0; j < std::size(specials); ++j) x[j] = specials[j];
  std::vector<uint16_t> got(x.size(), 0xdead);
  kernels::cpu::round_rows_to_bf16(x.data(), got.data(), rows, cols, ld);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < ld; ++j) {
      const size_t i = static_cast<size_t>(r * ld + j);
      if (j < cols)
        ASSERT_EQ(got[i], float_to_bf16(x[i])) << "element " << i << " bits " << float_bits(x[i]);
      else
        ASSERT_EQ(got[i], 0xdead) << "the gap between rows was written";
    }
}

struct ConvCase {
  int64_t n, c, h, w, oc, k, stride, pad;
};

ConvShape shape_of(const ConvCase& k) {
  ConvShape s;
  s.n = k.n, s.c = k.c, s.h = k.h, s.w = k.w, s.oc = k.oc, s.kh = k.k, s.kw = k.k, s.stride = k.stride,
  s.pad = k.pad;
  s.oh = kernels::conv_output_size(k.h, k.k, k.stride, k.pad);
  s.ow = kernels::conv_output_size(k.w, k.k, k.stride, k.pad);
  return s;
}

std::vector<ConvBackend> conv_backends() {
  std::vector<ConvBackend> backends = {ConvBackend::kIm2col};
  if (kernels::cpu::onednn_built()) backends.push_back(ConvBackend::kOneDnn);
  return backends;
}

struct ConvResult {
  std::vector<float> y, dx, dw, db;
};

ConvResult run_conv(ConvBackend backend, const ConvShape& s, const std::vector<float>& x, const std::vector<float>& w,
                    const std::vector<float>& dy, Precision precision) {
  std::vector<float> workspace(static_cast<size_t>(kernels::cpu::conv2d_workspace_floats(s)));
  ConvResult r{std::vector<float>(dy.size()), std::vector<float>(x.size()), std::vector<float>(w.size(), 0.0f),
               std::vector<float>(static_cast<size_t>(s.oc), 0.0f)};
  kernels::cpu::conv2d_forward_with(backend, x.data(), w.data(), nullptr, s, r.y.data(), workspace.data(), precision);
  kernels::cpu::conv2d_backward_with(backend, backend, x.data(), w.data(), dy.data(), s, r.dx.data(), r.dw.data(),
                                     r.db.data(), workspace.data(), precision);
  return r;
}

TEST(Bf16Conv, ForwardAndBackwardMatchFloat32WithinTheRoundingBound) {
  // A first layer (one input channel) and an inner one, padded and strided.
  for (const ConvCase& c : {ConvCase{4, 1, 12, 12, 8, 5, 1, 0}, ConvCase{3, 16, 9, 9, 16, 3, 2, 1}})
    for (const ConvBackend backend : conv_backends()) {
      const ConvShape s = shape_of(c);
      SCOPED_TRACE(std::string(backend == ConvBackend::kOneDnn ? "onednn" : "im2col") + " c " + std::to_string(s.c));
      std::mt19937 rng(5);
      const auto x = random_vector(static_cast<size_t>(s.n * s.c * s.h * s.w), rng);
      const auto w = random_vector(static_cast<size_t>(s.oc * s.c * s.kh * s.kw), rng);
      const auto dy = random_vector(static_cast<size_t>(s.n * s.oc * s.oh * s.ow), rng);
      const ConvResult got = run_conv(backend, s, x, w, dy, Precision::kBF16);
      const ConvResult f32 = run_conv(ConvBackend::kIm2col, s, x, w, dy, Precision::kF32);
      const ConvResult exact =
          run_conv(ConvBackend::kIm2col, s, rounded_bf16(x), rounded_bf16(w), rounded_bf16(dy), Precision::kF32);
      // Sums of absolute products: the same convolution on |x|, |w|, |dy|.
      const ConvResult scale = run_conv(ConvBackend::kIm2col, s, absolute(x), absolute(w), absolute(dy), Precision::kF32);

      // Reduction lengths: c kh kw for y, oc kh kw for dx, n oh ow for dW and dbias.
      const int64_t k_y = s.c * s.kh * s.kw, k_dx = s.oc * s.kh * s.kw, k_dw = s.n * s.oh * s.ow;
      expect_within(got.y, f32.y, scale.y, bf16_vs_f32_bound(k_y), "y vs fp32");
      expect_within(got.dx, f32.dx, scale.dx, bf16_vs_f32_bound(k_dx), "dx vs fp32");
      expect_within(got.dw, f32.dw, scale.dw, bf16_vs_f32_bound(k_dw), "dw vs fp32");
      expect_within(got.db, f32.db, scale.db, bf16_vs_f32_bound(k_dw), "dbias vs fp32");
      expect_within(got.y, exact.y, scale.y, f32_accumulation_bound(k_y), "y vs rounded inputs");
      expect_within(got.dx, exact.dx, scale.dx, f32_accumulation_bound(k_dx), "dx vs rounded inputs");
      expect_within(got.dw, exact.dw, scale.dw, f32_accumulation_bound(k_dw), "dw vs rounded inputs");
      EXPECT_TRUE(any_differs(got.y, f32.y) && any_differs(got.dx, f32.dx) && any_differs(got.dw, f32.dw))
          << "bf16 equals fp32 everywhere: the inputs were not rounded";
    }
}

}  // namespace
}  // namespace mirrored
