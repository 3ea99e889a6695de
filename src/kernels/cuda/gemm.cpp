// The matrix product through cuBLAS, on the context's handle and stream.
#include <cstdint>

#include "cublas_check.h"
#include "cuda_kernels.h"
#include "mirrored/core/cuda_check.h"
#include "mirrored/core/error.h"

namespace mirrored::kernels::cuda {

void gemm(Context& ctx, bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
          Precision precision) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // no products: c = beta * c (cuBLAS would reject the zero leading dimension)
    if (beta == 0.0f) {  // BLAS semantics: beta = 0 overwrites, even NaN
      MIRRORED_CUDA_CHECK(cudaMemsetAsync(c, 0, static_cast<size_t>(m * ldc) * sizeof(float), ctx.stream()));
    } else if (beta != 1.0f) {
      scale_on(ctx.stream(), c, m * ldc, beta);
    }
    return;
  }
  // cuBLAS is column-major. A row-major [r, c] buffer read column-major is its transpose,
  // so C^T = op(B)^T op(A)^T is computed instead: same buffers, operands swapped.
  const cublasOperation_t op_a = transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  MIRRORED_CHECK(m <= INT32_MAX && n <= INT32_MAX && k <= INT32_MAX, "gemm dimensions exceed cuBLAS's int");
  if (precision == Precision::kBF16) {
    // bfloat16 copies of a and b (whole spans, so the leading dimensions hold), multiplied
    // with float32 accumulation into the float32 c.
    const int64_t a_span = ((transpose_a ? k : m) - 1) * lda + (transpose_a ? m : k);
    const int64_t b_span = ((transpose_b ? n : k) - 1) * ldb + (transpose_b ? k : n);
    auto* a16 = static_cast<uint16_t*>(ctx.bf16_scratch_of_size(0, static_cast<size_t>(a_span) * 2));
    auto* b16 = static_cast<uint16_t*>(ctx.bf16_scratch_of_size(1, static_cast<size_t>(b_span) * 2));
    float_to_bf16(a, a16, a_span, ctx.stream());
    float_to_bf16(b, b16, b_span, ctx.stream());
    MIRRORED_CUBLAS_CHECK(cublasGemmEx(ctx.cublas(), op_b, op_a, static_cast<int>(n), static_cast<int>(m),
                                       static_cast<int>(k), &alpha, b16, CUDA_R_16BF, static_cast<int>(ldb), a16,
                                       CUDA_R_16BF, static_cast<int>(lda), &beta, c, CUDA_R_32F,
                                       static_cast<int>(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return;
  }
  MIRRORED_CUBLAS_CHECK(cublasSgemm(ctx.cublas(), op_b, op_a, static_cast<int>(n), static_cast<int>(m),
                                    static_cast<int>(k), &alpha, b, static_cast<int>(ldb), a, static_cast<int>(lda),
                                    &beta, c, static_cast<int>(ldc)));
}

}  // namespace mirrored::kernels::cuda
