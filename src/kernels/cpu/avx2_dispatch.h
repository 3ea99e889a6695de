#pragma once
// Elementwise loops built twice: for the baseline x86-64 the library targets (SSE2, four
// floats a vector) and for AVX2 (eight), picked once at run time. AVX2 alone, not FMA: a
// fused multiply-add rounds once where the baseline rounds twice, so the two builds would
// disagree; without it both run the same IEEE operations and give bit-identical results,
// and a run's numbers do not depend on which CPU it lands on.
//
// MIRRORED_AVX2_DISPATCH(name, params, args) defines `name` calling `name##_body` (an
// always_inline function taking `params`) through an AVX2 clone when the CPU has AVX2.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define MIRRORED_AVX2_DISPATCH(name, params, args)                                 \
  __attribute__((target("avx2"))) static void name##_avx2 params { name##_body args; } \
  void name params {                                                              \
    static const bool avx2 = [] {                                                 \
      __builtin_cpu_init();                                                       \
      return __builtin_cpu_supports("avx2") != 0;                                 \
    }();                                                                          \
    if (avx2) {                                                                   \
      name##_avx2 args;                                                           \
      return;                                                                     \
    }                                                                             \
    name##_body args;                                                             \
  }
#else
#define MIRRORED_AVX2_DISPATCH(name, params, args) \
  void name params { name##_body args; }
#endif
#define MIRRORED_ALWAYS_INLINE [[gnu::always_inline]] inline
