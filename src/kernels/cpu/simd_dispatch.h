#pragma once
// Elementwise loops built three times: for the baseline x86-64 the library targets (SSE2,
// four floats a vector), for AVX2 (eight) and for AVX-512 (sixteen), one picked at run time
// (simd_level.h: the widest the CPU has, or fewer where MIRRORED_CPU_SIMD asks). All three
// run the same IEEE operations in the same order, so they give bit-identical results and a
// run's numbers do not depend on the CPU it lands on. That needs no fused multiply-add (one
// rounding where the baseline rounds twice): the AVX2 clone does not enable FMA, and the
// AVX-512 one, which implies it, is compiled with -ffp-contract=off (src/CMakeLists.txt
// sets it for each file that includes this header).
// tests/unit/test_simd_levels.cpp runs every dispatched kernel at every level.
//
// MIRRORED_SIMD_DISPATCH(name, params, args) defines `void name params` calling
// `name##_body args` (an always_inline function) in the clone of the level in use.
#include "simd_level.h"
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#ifndef MIRRORED_FP_CONTRACT_OFF
#error "simd_dispatch.h needs -ffp-contract=off and -DMIRRORED_FP_CONTRACT_OFF (src/CMakeLists.txt)"
#endif
#define MIRRORED_SIMD_DISPATCH(name, params, args)                                         \
  __attribute__((target("avx512f"))) static void name##_avx512 params { name##_body args; } \
  __attribute__((target("avx2"))) static void name##_avx2 params { name##_body args; }      \
  void name params {                                                                      \
    switch (simd_level()) {                                                               \
      case SimdLevel::kAvx512: name##_avx512 args; return;                                \
      case SimdLevel::kAvx2: name##_avx2 args; return;                                    \
      case SimdLevel::kBaseline: break;                                                   \
    }                                                                                     \
    name##_body args;                                                                     \
  }
// The same for a body that is a template on the vector type it computes with (GCC's vector
// extensions, below): 16 floats in the AVX-512 clone, 8 in the AVX2 one, 4 in the baseline.
// The clones give the same bits when the body uses vectors for elementwise arithmetic only,
// never for sums across lanes.
#define MIRRORED_SIMD_DISPATCH_VECTOR(name, params, args)                                            \
  __attribute__((target("avx512f"))) static void name##_avx512 params { name##_body<SimdFloat16> args; } \
  __attribute__((target("avx2"))) static void name##_avx2 params { name##_body<SimdFloat8> args; }       \
  void name params {                                                                               \
    switch (simd_level()) {                                                                        \
      case SimdLevel::kAvx512: name##_avx512 args; return;                                         \
      case SimdLevel::kAvx2: name##_avx2 args; return;                                             \
      case SimdLevel::kBaseline: break;                                                            \
    }                                                                                              \
    name##_body<SimdFloat4> args;                                                                  \
  }
#else
#define MIRRORED_SIMD_DISPATCH(name, params, args) \
  void name params { name##_body args; }
#define MIRRORED_SIMD_DISPATCH_VECTOR(name, params, args) \
  void name params { name##_body<SimdFloat4> args; }
#endif
namespace mirrored::kernels::cpu {
using SimdFloat4 = float __attribute__((vector_size(16)));
using SimdFloat8 = float __attribute__((vector_size(32)));
using SimdFloat16 = float __attribute__((vector_size(64)));
}  // namespace mirrored::kernels::cpu
#define MIRRORED_ALWAYS_INLINE [[gnu::always_inline]] inline
