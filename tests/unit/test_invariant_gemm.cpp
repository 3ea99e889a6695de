// Thread-invariant matrix products (reduction = invariant; kernels/cpu/blas.cpp): gemm gives
// the bits of the 64-column tiles run with the caller's beta, the way the products ran
// before gemm zeroed c itself for beta = 0, and the same bits at 1 and 2 threads; on odd
// shapes (m, n, k not multiples of the tile or of any kernel's block), every transpose,
// alpha and beta, and c inside a wider matrix.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "../../src/kernels/cpu/cpu_kernels.h"

namespace mirrored {
namespace {

struct Shape {
  int64_t m, n, k;
};

// Thread-invariant mode for the test's duration; what it was before, after.
class InvariantGemm : public testing::Test {
 protected:
  void SetUp() override {
    was_invariant_ = kernels::cpu::thread_invariant();
    was_threads_ = kernels::cpu::threads();
    kernels::cpu::set_thread_invariant(true);
  }
  void TearDown() override {
    kernels::cpu::set_thread_invariant(was_invariant_);
    kernels::cpu::set_threads(was_threads_);
  }

 private:
  bool was_invariant_ = false;
  int was_threads_ = 1;
};

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST_F(InvariantGemm, SameBitsAsTheTilesAskedForBetaAtOneAndTwoThreads) {
  // (16, 256, 784) and (128, 384, 128): a virtual replica's products in the mlp and gpt
  // recipes; 64 x 16 x 784 takes OpenBLAS's small-matrix kernels, 64 x 128 x 128 does not.
  const Shape shapes[] = {{1, 1, 1},    {7, 65, 3},     {33, 130, 17},  {16, 256, 784},
                          {128, 384, 128}, {5, 64, 1000}, {130, 200, 70}, {2, 129, 513}};
  const float alphas[] = {1.0f, 0.5f, 1.0f, -2.0f};
  const float betas[] = {0.0f, 0.0f, 1.0f, 0.25f};
  std::mt19937 rng(17);
  for (const Shape& s : shapes) {
    for (int transposes = 0; transposes < 4; ++transposes) {
      const bool ta = (transposes & 1) != 0, tb = (transposes & 2) != 0;
      // a is [m, k] or, transposed, [k, m]; b is [k, n] or [n, k]; c sits in a matrix 3
      // columns wider (ldc > n).
      const int64_t lda = ta ? s.m : s.k, ldb = tb ? s.k : s.n, ldc = s.n + 3;
      const std::vector<float> a = random_floats(static_cast<size_t>(s.m * s.k), rng);
      const std::vector<float> b = random_floats(static_cast<size_t>(s.k * s.n), rng);
      for (size_t ab = 0; ab < std::size(alphas); ++ab) {
        std::vector<float> start = random_floats(static_cast<size_t>(s.m * ldc), rng);
        // beta = 0: c's old values are never read, NaN included.
        if (betas[ab] == 0.0f)
          for (int64_t i = 0; i < s.m; ++i) start[static_cast<size_t>(i * ldc)] = std::numeric_limits<float>::quiet_NaN();
        kernels::cpu::set_threads(1);
        std::vector<float> want = start;
        kernels::cpu::gemm_tiles_as_asked(ta, tb, s.m, s.n, s.k, alphas[ab], a.data(), lda, b.data(), ldb, betas[ab],
                                          want.data(), ldc);
        for (const int threads : {1, 2}) {
          kernels::cpu::set_threads(threads);
          std::vector<float> got = start;
          kernels::cpu::gemm(ta, tb, s.m, s.n, s.k, alphas[ab], a.data(), lda, b.data(), ldb, betas[ab], got.data(),
                             ldc);
          ASSERT_TRUE(same_bits(got, want)) << s.m << " x " << s.n << " x " << s.k << " transposes " << ta << tb
                                            << " alpha " << alphas[ab] << " beta " << betas[ab] << ", " << threads
                                            << " thread(s)";
        }
      }
    }
  }
}

}  // namespace
}  // namespace mirrored
