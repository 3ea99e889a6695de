// bfloat16 matrix products on the CPU: which CPUs multiply bfloat16 natively, the rounding
// of inputs, the choice of implementation and the portable one (rounded copies + sgemm).
#include <cpuid.h>
#include <immintrin.h>

#include <cstdlib>
#include <string_view>
#include <vector>

#include "bf16_backends.h"
#include "conv_backends.h"
#include "mirrored/core/bf16.h"
#include "mirrored/core/error.h"
#include "mirrored/core/strings.h"
#include "simd_level.h"

namespace mirrored::kernels::cpu {
namespace {

// CPUID leaf 7: sub-leaf 1 EAX bit 5 is AVX512_BF16, sub-leaf 0 EDX bit 22 is AMX-BF16.
bool cpuid_native_bf16() {
  // Below AVX-512 (the CPU's, or MIRRORED_CPU_SIMD's) there are no bf16 instructions to use.
  if (simd_level() != SimdLevel::kAvx512) return false;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return false;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  const bool amx_bf16 = (edx >> 22) & 1u;
  __cpuid_count(7, 1, eax, ebx, ecx, edx);
  const bool avx512_bf16 = (eax >> 5) & 1u;
  return avx512_bf16 || amx_bf16;
}

Bf16Gemm bf16_override_or_auto() {
  const char* env = std::getenv("MIRRORED_CPU_BF16");
  const std::string_view name = env ? env : "auto";
  if (name == "rounded") return Bf16Gemm::kRounded;
  if (name == "mkl") {
    mkl_bf16_version();  // loads it: a missing MKL stops start-up, not the first product
    return Bf16Gemm::kMkl;
  }
  if (name == "onednn") {
    require_onednn_build("MIRRORED_CPU_BF16");
    return Bf16Gemm::kOneDnn;
  }
  if (name != "auto" && !name.empty())
    throw InputError(str_cat("MIRRORED_CPU_BF16=", name, ": expected auto, onednn, mkl or rounded"));
  // Without native instructions oneDNN emulates bf16 (or, below AVX-512, has no bf16
  // matmul at all): rounded copies + sgemm are as fast and run everywhere.
  return onednn_built() && native_bf16() ? Bf16Gemm::kOneDnn : Bf16Gemm::kRounded;
}

// Grown, never shrunk: steady-state products allocate nothing. Kernels run on the main
// thread only (see dnnl_conv.cpp), so one set of buffers is enough.
std::vector<float>& scratch(int which) {
  static std::vector<float> buffers[2];
  return buffers[which];
}

// The elements of a row-major buffer that op(x) with these extents and row stride reads.
int64_t span(int64_t rows, int64_t cols, int64_t ld) { return rows == 0 ? 0 : (rows - 1) * ld + cols; }

// float_to_bf16 (core/bf16.h) 16 lanes at a time, bit for bit: the same add-and-shift
// rounding to nearest even and the same quiet NaN. Compiled for AVX-512 whatever the build
// targets; called only where the CPU has it. Rounding is on the critical path of every bf16
// product (the inputs are float32), and the scalar loop costs a third of the product itself.
// The zero-masked forms of the shifts and the narrowing (all lanes kept) sidestep GCC 12's
// false "may be used uninitialized" on the unmasked intrinsics.
__attribute__((target("avx512f"))) void round_row_avx512(const float* in, uint16_t* out, int64_t n) {
  const __m512i one = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7fff);
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff), infinity = _mm512_set1_epi32(0x7f800000);
  const __m512i quiet = _mm512_set1_epi32(0x40);
  const __mmask16 kAll = 0xffff;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i bits = _mm512_castps_si512(_mm512_loadu_ps(in + i));
    const __m512i upper = _mm512_maskz_srli_epi32(kAll, bits, 16);
    const __m512i rounding = _mm512_add_epi32(half, _mm512_and_si512(upper, one));
    __m512i rounded = _mm512_maskz_srli_epi32(kAll, _mm512_add_epi32(bits, rounding), 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, magnitude), infinity);
    rounded = _mm512_mask_mov_epi32(rounded, nan, _mm512_or_si512(upper, quiet));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm512_maskz_cvtepi32_epi16(kAll, rounded));
  }
  for (; i < n; ++i) out[i] = float_to_bf16(in[i]);
}

bool has_avx512f() { return simd_level() == SimdLevel::kAvx512; }

}  // namespace

bool native_bf16() {
  static const bool value = cpuid_native_bf16();
  return value;
}

Bf16Gemm bf16_gemm_backend() {
  static const Bf16Gemm value = bf16_override_or_auto();
  return value;
}

void round_to_bf16(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_float(float_to_bf16(x[i]));
}

void round_rows_to_bf16(const float* x, uint16_t* y, int64_t rows, int64_t cols, int64_t ld) {
  const bool vector = has_avx512f();
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * ld;
    uint16_t* out = y + r * ld;
    if (vector) {
      round_row_avx512(in, out, cols);
    } else {
      for (int64_t j = 0; j < cols; ++j) out[j] = float_to_bf16(in[j]);
    }
  }
}

void round_to_bf16_bits(const float* x, uint16_t* y, int64_t n) { round_rows_to_bf16(x, y, 1, n, n); }

const uint16_t* rounded_operand(int which, Bf16Operand operand, int64_t rows, int64_t cols, int64_t ld) {
  if (operand.bf16) return operand.bf16;
  const float* x = operand.f32;
  static std::vector<uint16_t> buffers[2];
  std::vector<uint16_t>& buffer = buffers[which];
  const int64_t x_span = span(rows, cols, ld);
  if (static_cast<int64_t>(buffer.size()) < x_span) buffer.resize(static_cast<size_t>(x_span));
  round_rows_to_bf16(x, buffer.data(), rows, cols, ld);
  return buffer.data();
}

namespace {
// x's span as float32 bfloat16 values in `copy`: rounded, or widened (exactly) from bits
// rounded before.
const float* widened_operand(Bf16Operand x, int64_t x_span, std::vector<float>& copy) {
  if (static_cast<int64_t>(copy.size()) < x_span) copy.resize(static_cast<size_t>(x_span));
  if (x.bf16) {
    for (int64_t i = 0; i < x_span; ++i) copy[static_cast<size_t>(i)] = bf16_to_float(x.bf16[i]);
  } else {
    round_to_bf16(x.f32, copy.data(), x_span);
  }
  return copy.data();
}
}  // namespace

void rounded_gemm_bf16(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
                       Bf16Operand a, int64_t lda, Bf16Operand b, int64_t ldb, float beta, float* c,
                       int64_t ldc) {
  const int64_t a_rows = transpose_a ? k : m, a_cols = transpose_a ? m : k;
  const int64_t b_rows = transpose_b ? n : k, b_cols = transpose_b ? k : n;
  // The whole span, gaps between rows included, so the copies keep the row strides; the
  // gaps are rounded too but never read.
  const float* ra = widened_operand(a, span(a_rows, a_cols, lda), scratch(0));
  const float* rb = widened_operand(b, span(b_rows, b_cols, ldb), scratch(1));
  // Products of two bfloat16 values are exact in float32: sgemm on the rounded copies is
  // the bf16-input, float32-accumulate product.
  gemm(transpose_a, transpose_b, m, n, k, alpha, ra, lda, rb, ldb, beta, c, ldc);
}

void gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc, Precision precision) {
  if (precision == Precision::kF32) {
    gemm(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  gemm_bf16(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm_bf16(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, Bf16Operand a,
               int64_t lda, Bf16Operand b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0 || k == 0) {
    // Nothing to multiply: c = beta * c as gemm does it (no operand is read).
    gemm(transpose_a, transpose_b, m, n, k, alpha, a.f32, lda, b.f32, ldb, beta, c, ldc);
    return;
  }
  // oneDNN and MKL split their work by the thread count; in thread-invariant mode the
  // rounded copies go through tiled sgemm instead (blas.cpp).
  const Bf16Gemm backend = thread_invariant() ? Bf16Gemm::kRounded : bf16_gemm_backend();
  switch (backend) {
    case Bf16Gemm::kOneDnn:
      onednn_gemm_bf16(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      return;
    case Bf16Gemm::kMkl:
      mkl_gemm_bf16(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      return;
    case Bf16Gemm::kRounded:
      rounded_gemm_bf16(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      return;
  }
}

#ifndef MIRRORED_WITH_ONEDNN
void onednn_gemm_bf16(bool, bool, int64_t, int64_t, int64_t, float, Bf16Operand, int64_t, Bf16Operand, int64_t,
                      float, float*, int64_t) {
  MIRRORED_CHECK(false, "oneDNN bf16 matmul called in a build without oneDNN");
}
#endif

}  // namespace mirrored::kernels::cpu
