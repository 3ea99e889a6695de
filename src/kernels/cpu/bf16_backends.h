#pragma once
// bfloat16 products on the CPU (core/precision.h): the implementations behind cpu::gemm
// with Precision::kBF16, and the choice between them. Internal to the CPU kernels and their
// tests, which run each on the same cases and compare.
#include <cstdint>
#include <string>

#include "cpu_kernels.h"

namespace mirrored::kernels::cpu {

enum class Bf16Gemm { kOneDnn, kRounded, kMkl };

// The implementation cpu::gemm uses for bf16: oneDNN's bf16 matmul where this build has
// oneDNN and the CPU multiplies bfloat16 natively, else kRounded. The environment variable
// MIRRORED_CPU_BF16 (auto, onednn, mkl or rounded; read once) overrides; kMkl is chosen
// only by name, since no CPU with native bf16 has measured it against oneDNN here yet.
Bf16Gemm bf16_gemm_backend();

// y[i] = x[i] rounded to the nearest bfloat16 (ties to even), kept as a float.
void round_to_bf16(const float* x, float* y, int64_t n);
// The same for a [rows, cols] block with row stride ld (both buffers), into bfloat16 bits.
void round_rows_to_bf16(const float* x, uint16_t* y, int64_t rows, int64_t cols, int64_t ld);
// The bfloat16 bits of operand x: its own when it was rounded before, else round_rows_to_bf16
// into grown scratch buffer `which` (0 or 1: one per operand), which keeps x's row stride and
// is valid until the next call with the same `which` (main thread only).
const uint16_t* rounded_operand(int which, Bf16Operand x, int64_t rows, int64_t cols, int64_t ld);

// Each takes cpu::gemm_bf16's arguments and gives its result with bf16 inputs and float32
// accumulation. kRounded: inputs as rounded float copies, then sgemm (any CPU, any build).
void rounded_gemm_bf16(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
                       Bf16Operand a, int64_t lda, Bf16Operand b, int64_t ldb, float beta, float* c, int64_t ldc);
// kOneDnn (dnnl_matmul.cpp; only when onednn_built()): inputs in bfloat16 buffers (rounded
// there unless they were before), oneDNN's matmul with float32 accumulation and output;
// primitives cached per shape.
void onednn_gemm_bf16(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
                      Bf16Operand a, int64_t lda, Bf16Operand b, int64_t ldb, float beta, float* c, int64_t ldc);
// kMkl (mkl_bf16_gemm.cpp; any build): inputs in bfloat16 buffers as for kOneDnn, then MKL's
// cblas_gemm_bf16bf16f32 from libmkl_rt opened at run time (MIRRORED_MKL_LIBRARY, else
// libmkl_rt.so.3 or .so.2 on the library path). Loading fails with an InputError that
// names what was tried; the first call loads, and MIRRORED_CPU_BF16=mkl calls it at start-up.
void mkl_gemm_bf16(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
                   Bf16Operand a, int64_t lda, Bf16Operand b, int64_t ldb, float beta, float* c, int64_t ldc);
// MKL's version, loading it as mkl_gemm_bf16 does.
std::string mkl_bf16_version();
// Loads MKL from `library` (a path, or a name the loader searches for) as mkl_gemm_bf16
// does and returns its version; throws InputError naming the library and what failed.
std::string load_mkl_bf16(const std::string& library);

}  // namespace mirrored::kernels::cpu
