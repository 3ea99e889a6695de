#include "blas_core.h"

#include <unistd.h>

#include <cstdlib>

#include "mirrored/core/error.h"
#include "mirrored/core/strings.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored::cli {
namespace {
// Set in the re-executed image: what OpenBLAS had picked before mirrored overrode it.
constexpr const char* kDetectedCoreVariable = "MIRRORED_BLAS_CORE_DETECTED";
}  // namespace

void use_best_blas_core(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;  // the user's choice (or ours, after the exec)
  std::string better;
  try {
    better = kernels::cpu_blas_core_to_switch_to();
  } catch (const InputError&) {
    return;  // a bad MIRRORED_CPU_SIMD: the command reports it, where errors are reported
  }
  if (better.empty()) return;
  setenv("OPENBLAS_CORETYPE", better.c_str(), 1);
  setenv(kDetectedCoreVariable, kernels::cpu_blas_core().c_str(), 1);
  execv("/proc/self/exe", argv);
  // Could not re-execute (no /proc): keep running on the slower kernels.
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv(kDetectedCoreVariable);
}

std::string blas_core_description() {
  const char* detected = std::getenv(kDetectedCoreVariable);
  if (detected != nullptr)
    return str_cat(kernels::cpu_blas_core(), " (OpenBLAS detected ", detected,
                   "; set by mirrored from the CPU's feature flags and its SIMD level, ",
                   kernels::cpu_simd_level(), ")");
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr)
    return str_cat(kernels::cpu_blas_core(), " (OPENBLAS_CORETYPE=", std::getenv("OPENBLAS_CORETYPE"), ")");
  return kernels::cpu_blas_core();
}

}  // namespace mirrored::cli
