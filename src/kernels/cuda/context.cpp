// Per-device kernel context and the cuBLAS GEMM.
#include <array>
#include <memory>

#include "cublas_check.h"
#include "cuda_kernels.h"
#include "mirrored/core/cuda_check.h"
#include "mirrored/core/error.h"

namespace mirrored::kernels::cuda {

CublasHandle::CublasHandle(int device, cudaStream_t stream) {
  set_cuda_device(device);
  MIRRORED_CUBLAS_CHECK(cublasCreate(&handle_));
  MIRRORED_CUBLAS_CHECK(cublasSetStream(handle_, stream));
  // Full float32 math: TF32 tensor cores would change results past the 1e-5 agreement
  // with the CPU kernels that the tests (and the world-size equivalence) rely on.
  MIRRORED_CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_PEDANTIC_MATH));
}

CublasHandle::~CublasHandle() {
  if (handle_) MIRRORED_CUBLAS_LOG(cublasDestroy(handle_));
}

CublasHandle& CublasHandle::operator=(CublasHandle&& other) noexcept {
  if (this != &other) {
    if (handle_) MIRRORED_CUBLAS_LOG(cublasDestroy(handle_));
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

Context& context(int device) {
  // Created once per device and kept for the life of the process (see compute_stream()).
  constexpr int kMaxDevices = 64;
  static std::array<std::once_flag, kMaxDevices> once;
  static std::array<Context*, kMaxDevices> contexts{};
  MIRRORED_CHECK(device >= 0 && device < kMaxDevices, "CUDA device index ", device);
  const cudaStream_t stream = compute_stream(device);  // also makes `device` current
  std::call_once(once[static_cast<size_t>(device)], [&] {
    auto* ctx = new Context;
    ctx->device = device;
    ctx->stream = stream;
    ctx->cublas = CublasHandle(device, stream);
    contexts[static_cast<size_t>(device)] = ctx;
  });
  return *contexts[static_cast<size_t>(device)];
}

void gemm(Context& ctx, bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // no products: c = beta * c (cuBLAS would reject the zero leading dimension)
    if (beta == 0.0f) {  // BLAS semantics: beta = 0 overwrites, even NaN
      MIRRORED_CUDA_CHECK(cudaMemsetAsync(c, 0, static_cast<size_t>(m * ldc) * sizeof(float), ctx.stream));
    } else if (beta != 1.0f) {
      scale_on(ctx.stream, c, m * ldc, beta);
    }
    return;
  }
  // cuBLAS is column-major. A row-major [r, c] buffer read column-major is its transpose,
  // so C^T = op(B)^T op(A)^T is computed instead: same buffers, operands swapped.
  const cublasOperation_t op_a = transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  MIRRORED_CHECK(m <= INT32_MAX && n <= INT32_MAX && k <= INT32_MAX, "gemm dimensions exceed cuBLAS's int");
  MIRRORED_CUBLAS_CHECK(cublasSgemm(ctx.cublas.get(), op_b, op_a, static_cast<int>(n), static_cast<int>(m),
                                    static_cast<int>(k), &alpha, b, static_cast<int>(ldb), a, static_cast<int>(lda),
                                    &beta, c, static_cast<int>(ldc)));
}

}  // namespace mirrored::kernels::cuda
