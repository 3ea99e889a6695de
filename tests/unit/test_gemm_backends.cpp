// The float32 matrix products (gemm_backends.h): oneDNN's matmul against a double-precision
// reference on every transpose, row strides wider than the rows, alpha and beta (beta = 0
// never reads c), shapes from one element to the gpt recipe's; and the choice between the
// backends.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "../../src/kernels/cpu/conv_backends.h"
#include "../../src/kernels/cpu/cpu_kernels.h"
#include "../../src/kernels/cpu/gemm_backends.h"
#include "mirrored/core/error.h"

namespace mirrored {
namespace {

using kernels::cpu::F32Gemm;

struct GemmCase {
  int64_t m, n, k;
  bool ta, tb;
  int64_t pad;  // extra floats per row of every operand
  float alpha, beta;
};

// c = alpha op(a) op(b) + beta c in double, row-major with the given row strides.
std::vector<double> reference(const GemmCase& g, const std::vector<float>& a, int64_t lda, const std::vector<float>& b,
                              int64_t ldb, const std::vector<float>& c, int64_t ldc) {
  std::vector<double> out(c.begin(), c.end());
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j) {
      double sum = 0.0;
      for (int64_t p = 0; p < g.k; ++p) {
        const double av = g.ta ? a[static_cast<size_t>(p * lda + i)] : a[static_cast<size_t>(i * lda + p)];
        const double bv = g.tb ? b[static_cast<size_t>(j * ldb + p)] : b[static_cast<size_t>(p * ldb + j)];
        sum += av * bv;
      }
      double& cv = out[static_cast<size_t>(i * ldc + j)];
      cv = g.alpha * sum + (g.beta == 0.0f ? 0.0 : g.beta * cv);
    }
  return out;
}

void expect_onednn_matches(const GemmCase& g) {
  SCOPED_TRACE(testing::Message() << "m " << g.m << " n " << g.n << " k " << g.k << " ta " << g.ta << " tb " << g.tb
                                  << " pad " << g.pad << " alpha " << g.alpha << " beta " << g.beta);
  const int64_t a_rows = g.ta ? g.k : g.m, a_cols = g.ta ? g.m : g.k;
  const int64_t b_rows = g.tb ? g.n : g.k, b_cols = g.tb ? g.k : g.n;
  const int64_t lda = a_cols + g.pad, ldb = b_cols + g.pad, ldc = g.n + g.pad;
  std::mt19937 rng(static_cast<unsigned>(g.m * 131 + g.n * 17 + g.k));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> a(static_cast<size_t>(a_rows * lda)), b(static_cast<size_t>(b_rows * ldb)),
      c(static_cast<size_t>(g.m * ldc));
  for (auto& v : a) v = u(rng);
  for (auto& v : b) v = u(rng);
  // beta = 0: c holds NaN, which must not reach the result.
  for (auto& v : c) v = g.beta == 0.0f ? std::numeric_limits<float>::quiet_NaN() : u(rng);
  const std::vector<double> want = reference(g, a, lda, b, ldb, c, ldc);
  std::vector<float> got = c;
  kernels::cpu::onednn_gemm_f32(g.ta, g.tb, g.m, g.n, g.k, g.alpha, a.data(), lda, b.data(), ldb, g.beta, got.data(),
                                ldc);
  double worst = 0.0;
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j) {
      const auto at = static_cast<size_t>(i * ldc + j);
      ASSERT_TRUE(std::isfinite(got[at])) << "c[" << i << ", " << j << "]";
      worst = std::max(worst, std::abs(got[at] - want[at]) / (1.0 + std::abs(want[at])));
    }
  EXPECT_LT(worst, 1e-5 * std::sqrt(static_cast<double>(g.k)));
  // The padding between rows of c is left alone.
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = g.n; j < ldc; ++j) {
      const auto at = static_cast<size_t>(i * ldc + j);
      EXPECT_TRUE(std::isnan(c[at]) ? std::isnan(got[at]) : got[at] == c[at]);
    }
}

TEST(GemmBackends, OneDnnMatchesTheDefinition) {
  if (!kernels::cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN: OpenBLAS computes every product";
  for (const bool ta : {false, true})
    for (const bool tb : {false, true}) {
      expect_onednn_matches({1, 1, 1, ta, tb, 0, 1.0f, 0.0f});
      expect_onednn_matches({3, 17, 5, ta, tb, 3, 1.0f, 0.0f});
      expect_onednn_matches({33, 7, 64, ta, tb, 1, 0.5f, 1.0f});    // alpha, and accumulating into c
      expect_onednn_matches({16, 40, 9, ta, tb, 0, 1.0f, -0.25f});  // a general beta
    }
  // The gpt recipe's forward, input-gradient and weight-gradient products (width 128).
  expect_onednn_matches({768, 384, 128, false, true, 0, 1.0f, 0.0f});
  expect_onednn_matches({768, 128, 512, false, false, 0, 1.0f, 0.0f});
  expect_onednn_matches({512, 128, 768, true, false, 0, 1.0f, 1.0f});
}

TEST(GemmBackends, OneDnnReusesItsPrimitiveForNewOperands) {
  if (!kernels::cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN";
  // The same shape twice with other buffers: the cached primitive must read the new ones.
  std::vector<float> a1(6, 1.0f), a2(6, 2.0f), b(6, 1.0f), c1(4), c2(4);
  kernels::cpu::onednn_gemm_f32(false, false, 2, 2, 3, 1.0f, a1.data(), 3, b.data(), 2, 0.0f, c1.data(), 2);
  kernels::cpu::onednn_gemm_f32(false, false, 2, 2, 3, 1.0f, a2.data(), 3, b.data(), 2, 0.0f, c2.data(), 2);
  EXPECT_EQ(c1, std::vector<float>(4, 3.0f));
  EXPECT_EQ(c2, std::vector<float>(4, 6.0f));
}

// A product with one row or one column (the bias gradient dy^T 1, and its transpose) runs on
// OpenBLAS whatever the backend: oneDNN's matmul runs it scalar. The reference is OpenBLAS
// itself on one tile (the thread-invariant mode's products with n <= 64 are one sgemm).
TEST(GemmBackends, VectorProductsRunOnOpenBlas) {
  const bool was_invariant = kernels::cpu::thread_invariant();
  const int was_threads = kernels::cpu::threads();
  kernels::cpu::set_threads(1);
  std::mt19937 rng(29);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  struct Vector {
    int64_t m, n, k;
    bool ta;
  };
  // The gpt recipe's bias gradients (768 tokens, 384 and 128 columns), and a row times a matrix.
  for (const Vector& v : {Vector{384, 1, 768, true}, Vector{128, 1, 768, true}, Vector{1, 300, 257, false}}) {
    SCOPED_TRACE(testing::Message() << "m " << v.m << " n " << v.n << " k " << v.k);
    std::vector<float> a(static_cast<size_t>(v.m * v.k)), b(static_cast<size_t>(v.k * v.n));
    for (auto& x : a) x = u(rng);
    for (auto& x : b) x = u(rng);
    const int64_t lda = v.ta ? v.m : v.k;
    std::vector<float> got(static_cast<size_t>(v.m * v.n), 0.5f), want = got;
    kernels::cpu::set_thread_invariant(false);
    kernels::cpu::gemm(v.ta, false, v.m, v.n, v.k, 1.0f, a.data(), lda, b.data(), v.n, 1.0f, got.data(), v.n);
    kernels::cpu::set_thread_invariant(true);
    kernels::cpu::gemm_tiles_as_asked(v.ta, false, v.m, v.n, v.k, 1.0f, a.data(), lda, b.data(), v.n, 1.0f,
                                      want.data(), v.n);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
  }
  kernels::cpu::set_thread_invariant(was_invariant);
  kernels::cpu::set_threads(was_threads);
}

TEST(GemmBackends, ChoiceByName) {
  EXPECT_EQ(kernels::cpu::f32_gemm_backend_for("openblas"), F32Gemm::kOpenBlas);
  EXPECT_EQ(kernels::cpu::f32_gemm_backend_for(""), kernels::cpu::f32_gemm_backend_for("auto"));
  EXPECT_THROW(kernels::cpu::f32_gemm_backend_for("mkl"), InputError);
  if (kernels::cpu::onednn_built()) {
    EXPECT_EQ(kernels::cpu::f32_gemm_backend_for("onednn"), F32Gemm::kOneDnn);
  } else {
    EXPECT_THROW(kernels::cpu::f32_gemm_backend_for("onednn"), InputError);
    EXPECT_EQ(kernels::cpu::f32_gemm_backend_for("auto"), F32Gemm::kOpenBlas);
  }
}

}  // namespace
}  // namespace mirrored
