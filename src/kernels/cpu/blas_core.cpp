// Which OpenBLAS kernels run. OpenBLAS picks its kernel set ("core") from the CPU model
// number when the library loads. Under hypervisors that report a generic model ("Intel
// Xeon Processor") it falls back to Prescott, SSE3 kernels that run sgemm 2-2.5x slower
// than the AVX2/AVX-512 ones the CPU actually has (measured on this project's CI machines:
// cnn bench 776 samples/s as Prescott, 1831 as SkylakeX). The feature flags tell the truth.
// Under a SIMD level below the CPU's (MIRRORED_CPU_SIMD, simd_level.h) the set is that
// level's, so the products run what a CPU without those instructions runs.
#include <cblas.h>

#include <string>

#include "cpu_kernels.h"
#include "simd_level.h"

extern "C" char* openblas_get_corename(void);

namespace mirrored::kernels::cpu {
namespace {
bool is_vector_core(const std::string& core) {
  // OpenBLAS cores with AVX2 (or better) sgemm kernels; anything else is an older set.
  for (const char* name : {"haswell", "zen", "skylakex", "cooperlake", "sapphirerapids"})
    if (core == name) return true;
  return false;
}

bool is_avx512_core(const std::string& core) {
  for (const char* name : {"skylakex", "cooperlake", "sapphirerapids"})
    if (core == name) return true;
  return false;
}

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return text;
}

// The widest kernel set the CPU's feature flags support within the SIMD level in use.
std::string core_for_simd_level() {
  __builtin_cpu_init();
  const SimdLevel level = simd_level();
  if (level == SimdLevel::kAvx512 && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd"))
    return "SkylakeX";
  if (level >= SimdLevel::kAvx2 && __builtin_cpu_supports("fma")) return "Haswell";
  return "Prescott";  // SSE3: OpenBLAS's own fallback on x86-64
}
}  // namespace

std::string blas_core() { return openblas_get_corename(); }

std::string blas_core_to_switch_to() {
  const std::string core = lower(blas_core());
  const SimdLevel level = simd_level();
  const bool within_level = level == SimdLevel::kAvx512   ? true
                            : level == SimdLevel::kAvx2 ? !is_avx512_core(core)
                                                          : !is_vector_core(core);
  if (!within_level) return core_for_simd_level();
  // OpenBLAS fell back to an older set on a CPU it did not recognise: the flags tell the truth.
  if (level != SimdLevel::kBaseline && !is_vector_core(core)) {
    const std::string better = core_for_simd_level();
    return lower(better) == core ? std::string() : better;
  }
  return {};
}

}  // namespace mirrored::kernels::cpu
