#pragma once
// Which vector instructions the CPU kernels use: the widest the CPU has, or fewer where
// MIRRORED_CPU_SIMD asks (auto | avx512 | avx2 | baseline). Every level gives the same bits
// (simd_dispatch.h), so a lower one changes speed only: one machine can run what a CPU
// without AVX-512 (or without AVX2) runs. The choices that follow the instructions follow
// the level too: OpenBLAS's kernel set (blas_core.cpp), oneDNN's widest instructions
// (dnnl_context.h), the float32 products' backend (blas.cpp) and native bf16.
#include <string_view>

namespace mirrored::kernels::cpu {

enum class SimdLevel { kBaseline, kAvx2, kAvx512 };

// The widest level this CPU (and its OS, which must save the registers) runs.
SimdLevel widest_simd_level();
// The level in use: MIRRORED_CPU_SIMD's, read on the first call, else the widest.
SimdLevel simd_level();
// A MIRRORED_CPU_SIMD value as a level; "" and "auto" are the widest. InputError for a
// name it does not know or a level above the CPU's.
SimdLevel simd_level_for(std::string_view setting);
// "avx512", "avx2" or "baseline": the names MIRRORED_CPU_SIMD takes.
const char* simd_level_name(SimdLevel level);
// For tests: run the SIMD clones at `level` from now on (at most the widest).
void set_simd_level(SimdLevel level);

}  // namespace mirrored::kernels::cpu
