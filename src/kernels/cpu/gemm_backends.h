#pragma once
// The float32 matrix products behind cpu::gemm, and the choice between them. Internal to the
// CPU kernels and their tests, which run both on the same cases and compare.
#include <cstdint>
#include <string_view>

#include "cpu_kernels.h"

namespace mirrored::kernels::cpu {

enum class F32Gemm { kOpenBlas, kOneDnn };

// What cpu::gemm uses in the default (fast) reduction; the thread-invariant mode always
// runs OpenBLAS in fixed tiles (blas.cpp). Auto: oneDNN's matmul on an Intel CPU with
// AVX-512 in a build with oneDNN, where it was measured 10-12% faster on the gpt recipe's
// products (docs/performance.md); OpenBLAS everywhere else, where nobody has measured the
// two side by side yet. The environment variable MIRRORED_CPU_GEMM (auto, openblas or
// onednn; read once) overrides. Either way a product with one row or one column (a bias
// gradient, dy^T 1) runs on OpenBLAS: oneDNN's matmul vectorises along the columns, so with
// one it runs scalar (136 us for the gpt's 768 x 384 against OpenBLAS's 43 us, operands
// out of cache).
F32Gemm f32_gemm_backend();
// The choice for one value of MIRRORED_CPU_GEMM ("" = unset); InputError for an unknown
// name, or onednn in a build without it.
F32Gemm f32_gemm_backend_for(std::string_view name);

// oneDNN's float32 matmul (dnnl_matmul.cpp; only when onednn_built()), cpu::gemm's
// arguments and semantics (beta = 0: c is not read); primitives cached per shape, in a
// cache that, like the convolutions' (dnnl_conv.cpp), is not locked: kernels run on the
// main thread only.
void onednn_gemm_f32(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
                     const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace mirrored::kernels::cpu
