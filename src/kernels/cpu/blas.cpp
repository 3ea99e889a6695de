// Matrix products go to OpenBLAS: its packed, blocked sgemm is what a CPU trainer has to
// match, and hand-written loops would not.
#include <cblas.h>

#include <climits>
#ifdef MIRRORED_WITH_ONEDNN
#include <omp.h>
#endif

#include "mirrored/core/error.h"
#include "cpu_kernels.h"

namespace mirrored::kernels::cpu {
namespace {
int blas_int(int64_t value) {
  MIRRORED_CHECK(value >= 0 && value <= INT_MAX, "BLAS dimension ", value, " out of int range");
  return static_cast<int>(value);
}
// 0 until set_threads: then threads() asks OpenBLAS what it chose by itself.
int g_threads = 0;
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
  cblas_sgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans,
              transpose_b ? CblasTrans : CblasNoTrans, blas_int(m), blas_int(n), blas_int(k), alpha, a,
              blas_int(lda), b, blas_int(ldb), beta, c, blas_int(ldc));
}

void set_threads(int threads) {
  MIRRORED_CHECK(threads >= 1, "thread count ", threads, " must be at least 1");
  openblas_set_num_threads(threads);
#ifdef MIRRORED_WITH_ONEDNN
  // oneDNN (the convolutions) runs on OpenMP's threads. This sets the calling thread's
  // count, which is what counts: kernels run on the main thread, which calls this.
  omp_set_num_threads(threads);
#endif
  g_threads = threads;
}

int threads() { return g_threads > 0 ? g_threads : openblas_get_num_threads(); }

}  // namespace mirrored::kernels::cpu
