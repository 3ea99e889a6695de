// Matrix products go to OpenBLAS, or to oneDNN's matmul where that was measured faster
// (gemm_backends.h): packed, blocked kernels are what a CPU trainer has to match, and
// hand-written loops would not.
#include <cblas.h>

#include <climits>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string_view>
#include <tuple>
#include <vector>

#include "conv_backends.h"
#include "gemm_backends.h"
#include "mirrored/core/error.h"
#include "mirrored/core/strings.h"
#include "simd_level.h"

namespace mirrored::kernels::cpu {
namespace {
int blas_int(int64_t value) {
  MIRRORED_CHECK(value >= 0 && value <= INT_MAX, "BLAS dimension ", value, " out of int range");
  return static_cast<int>(value);
}
// 0 until set_threads: then threads() asks OpenBLAS what it chose by itself.
int g_threads = 0;
bool g_thread_invariant = false;

// Thread-invariant products: C's columns in tiles of this width, fixed whatever the thread
// count. 64 columns keep OpenBLAS's packed kernels busy (A is packed once per tile: 1/64
// of the tile's work) while a 128- or 256-wide layer still has tiles for two threads.
constexpr int64_t kTileColumns = 64;

void sgemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans,
              transpose_b ? CblasTrans : CblasNoTrans, blas_int(m), blas_int(n), blas_int(k), alpha, a,
              blas_int(lda), b, blas_int(ldb), beta, c, blas_int(ldc));
}

// c's rows [0, m) x columns [0, n) = +0 (c's row stride is ldc).
void zero_rows(int64_t m, int64_t n, float* c, int64_t ldc) {
  if (ldc == n) {
    std::memset(c, 0, static_cast<size_t>(m * n) * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < m; ++i) std::memset(c + i * ldc, 0, static_cast<size_t>(n) * sizeof(float));
}

// Whether a product asking for beta = 0 may instead get c zeroed here and beta = 1. With
// beta = 0 OpenBLAS first stores +0 over each tile of c (sgemm_beta: a strided pass per
// tile, costlier than the tile's product on a virtual replica's small products), then adds
// alpha x the product to it; zeroing c once and asking for c + alpha x the product gives
// the same bits, because every route the call can take then adds that product to +0 alike:
// the packed kernels (which skip the beta pass for beta = 1) and the small-matrix kernels,
// whose choice depends on the shape and transposes only, not on beta (OpenBLAS 0.3.21,
// kernel/x86_64/sgemm_small_kernel_permit_skylakex.c), and which never produce -0 from a
// +0 start. Not for two untransposed operands: builds with the direct AVX-512 sgemm
// (USE_SGEMM_KERNEL_DIRECT) route those with beta = 0 and alpha = 1 to another kernel.
bool zero_c_here(bool transpose_a, bool transpose_b, float beta) {
  return beta == 0.0f && (transpose_a || transpose_b);
}

// OpenBLAS on several threads splits a product by rows and columns depending on the
// thread count, and on some cores (Zen) its kernels round a row differently in blocks of
// other heights: the bits then depend on --threads. Here every tile is one single-threaded
// sgemm of a fixed shape, whichever thread runs it, so the bits do not. `zero_c` (see
// zero_c_here): c is zeroed first and each tile asks for beta = 1.
void tiled_sgemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                 int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc, bool zero_c) {
  const int64_t tiles = (n + kTileColumns - 1) / kTileColumns;
  if (zero_c) {
    zero_rows(m, n, c, ldc);
    beta = 1.0f;
  }
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (tiles > 1 && g_threads > 1)
#endif
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t first = t * kTileColumns, columns = std::min(kTileColumns, n - first);
    // op(b) [k, n]: column j of op(b) is column j of b, or row j of b when transposed.
    const float* b_tile = transpose_b ? b + first * ldb : b + first;
    sgemm(transpose_a, transpose_b, m, columns, k, alpha, a, lda, b_tile, ldb, beta, c + first, ldc);
  }
}

// Whether one single-threaded sgemm over all of c's columns gives, for products of this
// shape, the bits of tiled_sgemm's 64-column tiles. One call packs A once where the tiles
// pack it once per tile: 8-15% of a virtual replica's product (128 rows of the gpt recipe,
// docs/performance.md). For most shapes measured the two give the same bits, but which
// kernel a call takes depends on its shape (the small-matrix kernels below about 100^3
// multiply-adds, the direct AVX-512 one for some untransposed shapes), some shapes round an
// edge of c differently, and no document promises anything; so each shape is put to the
// test once, on this CPU, at its first product: both ways on the same pseudo-random
// operands, of varied magnitudes and signs. Either way the result is the tiles' bits; the
// verdict only picks the faster way to them. Several threads keep the tiles, which they
// share.
struct ProductShape {
  bool transpose_a, transpose_b;
  int64_t m, n, k, lda, ldb, ldc;
  float alpha, beta;  // OpenBLAS's routes depend on alpha == 1, beta == 0 and beta == 1
  bool operator<(const ProductShape& o) const {
    return std::tie(transpose_a, transpose_b, m, n, k, lda, ldb, ldc, alpha, beta) <
           std::tie(o.transpose_a, o.transpose_b, o.m, o.n, o.k, o.lda, o.ldb, o.ldc, o.alpha, o.beta);
  }
};

// Values spread over 2^-8 to 2^8 of both signs, from a fixed sequence (an LCG): rounding
// differs between two orders of addition for nearly every sum of such terms.
std::vector<float> probe_values(size_t count, uint32_t seed) {
  std::vector<float> values(count);
  uint32_t state = seed;
  for (float& v : values) {
    state = state * 1664525u + 1013904223u;
    const float mantissa = 1.0f + static_cast<float>(state >> 9) * 0x1p-23f;
    v = std::ldexp((state & 1u) ? -mantissa : mantissa, static_cast<int>((state >> 1) & 15u) - 8);
  }
  return values;
}

bool one_call_gives_the_tiles_bits(const ProductShape& s) {
  // Not locked: kernels run on the main thread only.
  static std::map<ProductShape, bool> verdicts;
  const auto found = verdicts.find(s);
  if (found != verdicts.end()) return found->second;
  const int64_t a_rows = s.transpose_a ? s.k : s.m, b_rows = s.transpose_b ? s.n : s.k;
  // Where the two routes differ in a few values only (an edge of c: 3% of the values of a
  // 130 x 200 x 70 product here), each such value differs with probability ~0.8 on one
  // set of operands; four sets leave its difference unseen with odds of 1 in 600.
  bool same = true;
  for (uint32_t set = 0; set < 4 && same; ++set) {
    const std::vector<float> a = probe_values(static_cast<size_t>(a_rows * s.lda), 3 * set + 1);
    const std::vector<float> b = probe_values(static_cast<size_t>(b_rows * s.ldb), 3 * set + 2);
    std::vector<float> tiles = probe_values(static_cast<size_t>(s.m * s.ldc), 3 * set + 3), one = tiles;
    for (int64_t first = 0; first < s.n; first += kTileColumns) {
      const int64_t columns = std::min(kTileColumns, s.n - first);
      const float* b_tile = s.transpose_b ? b.data() + first * s.ldb : b.data() + first;
      sgemm(s.transpose_a, s.transpose_b, s.m, columns, s.k, s.alpha, a.data(), s.lda, b_tile, s.ldb, s.beta,
            tiles.data() + first, s.ldc);
    }
    sgemm(s.transpose_a, s.transpose_b, s.m, s.n, s.k, s.alpha, a.data(), s.lda, b.data(), s.ldb, s.beta,
          one.data(), s.ldc);
    same = std::memcmp(tiles.data(), one.data(), tiles.size() * sizeof(float)) == 0;
  }
  verdicts.emplace(s, same);
  return same;
}

// Thread-invariant products: tiled_sgemm, or one call where that gives the tiles' bits.
void thread_invariant_gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
                           const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                           int64_t ldc) {
  const bool zero_c = zero_c_here(transpose_a, transpose_b, beta);
  if (g_threads <= 1 && n > kTileColumns) {
    const float asked_beta = zero_c ? 1.0f : beta;
    const ProductShape shape{transpose_a, transpose_b, m, n, k, lda, ldb, ldc, alpha, asked_beta};
    if (one_call_gives_the_tiles_bits(shape)) {
      if (zero_c) zero_rows(m, n, c, ldc);
      sgemm(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, asked_beta, c, ldc);
      return;
    }
  }
  tiled_sgemm(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, zero_c);
}
}  // namespace

void gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // An empty product: BLAS would accept it, but its leading-dimension rules for empty
    // operands differ between implementations, so scale c here.
    for (int64_t i = 0; i < m; ++i) {
      float* row = c + i * ldc;
      for (int64_t j = 0; j < n; ++j) row[j] = beta == 0.0f ? 0.0f : beta * row[j];
    }
    return;
  }
  if (g_thread_invariant)
    thread_invariant_gemm(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else if (f32_gemm_backend() == F32Gemm::kOneDnn && m > 1 && n > 1)
    onednn_gemm_f32(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    sgemm(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

F32Gemm f32_gemm_backend_for(std::string_view name) {
  if (name == "openblas") return F32Gemm::kOpenBlas;
  if (name == "onednn") {
    require_onednn_build("MIRRORED_CPU_GEMM");
    return F32Gemm::kOneDnn;
  }
  if (name != "auto" && !name.empty())
    throw InputError(str_cat("MIRRORED_CPU_GEMM=", name, ": expected auto, openblas or onednn"));
  // Measured on Intel with AVX-512 only (gemm_backends.h); elsewhere OpenBLAS stays.
  __builtin_cpu_init();
  const bool measured_faster = __builtin_cpu_is("intel") && simd_level() == SimdLevel::kAvx512;
  return onednn_built() && measured_faster ? F32Gemm::kOneDnn : F32Gemm::kOpenBlas;
}

F32Gemm f32_gemm_backend() {
  static const F32Gemm backend = [] {
    const char* env = std::getenv("MIRRORED_CPU_GEMM");
    return f32_gemm_backend_for(env ? env : "");
  }();
  return backend;
}

#ifndef MIRRORED_WITH_ONEDNN
void onednn_gemm_f32(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
                     float, float*, int64_t) {
  MIRRORED_CHECK(false, "oneDNN matmul called in a build without oneDNN");
}
#endif

void gemm_tiles_as_asked(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
                         const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  MIRRORED_CHECK(g_thread_invariant && m > 0 && n > 0 && k > 0, "gemm_tiles_as_asked: thread-invariant, non-empty");
  tiled_sgemm(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, false);
}

void set_threads(int threads) {
  MIRRORED_CHECK(threads >= 1, "thread count ", threads, " must be at least 1");
  // Thread-invariant: OpenBLAS itself on one thread; the tiles use the threads instead.
  openblas_set_num_threads(g_thread_invariant ? 1 : threads);
#ifdef _OPENMP
  // oneDNN (the convolutions), the fused attention and the product tiles run on OpenMP's
  // threads. This sets the calling thread's count, which is what counts: kernels run on
  // the main thread, which calls this.
  omp_set_num_threads(threads);
#endif
  g_threads = threads;
}

void set_thread_invariant(bool on) {
  g_thread_invariant = on;
  if (g_threads > 0) set_threads(g_threads);
}

bool thread_invariant() { return g_thread_invariant; }

int threads() { return g_threads > 0 ? g_threads : openblas_get_num_threads(); }

}  // namespace mirrored::kernels::cpu
