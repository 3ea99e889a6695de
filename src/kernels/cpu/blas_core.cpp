// Which OpenBLAS kernels run. OpenBLAS picks its kernel set ("core") from the CPU model
// number when the library loads. Under hypervisors that report a generic model ("Intel
// Xeon Processor") it falls back to Prescott, SSE3 kernels that run sgemm 2-2.5x slower
// than the AVX2/AVX-512 ones the CPU actually has (measured on this project's CI machines:
// cnn bench 776 samples/s as Prescott, 1831 as SkylakeX). The feature flags tell the truth.
#include <cblas.h>

#include <string>

#include "cpu_kernels.h"

extern "C" char* openblas_get_corename(void);

namespace mirrored::kernels::cpu {
namespace {
bool is_vector_core(const std::string& core) {
  // OpenBLAS cores with AVX2 (or better) sgemm kernels; anything else is an older set.
  for (const char* name : {"haswell", "zen", "skylakex", "cooperlake", "sapphirerapids"})
    if (core == name) return true;
  return false;
}

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return text;
}
}  // namespace

std::string blas_core() { return openblas_get_corename(); }

std::string better_blas_core() {
  if (is_vector_core(lower(blas_core()))) return {};
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return {};
}

}  // namespace mirrored::kernels::cpu
