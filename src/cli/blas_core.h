#pragma once
// Runs mirrored on the OpenBLAS kernels the CPU supports. OpenBLAS chooses its kernel set
// when the library loads, from the CPU model; on virtual machines that hide the model it
// falls back to SSE3 kernels (2-2.5x slower sgemm). When that happened and the user has not
// set OPENBLAS_CORETYPE, the program re-executes itself with OPENBLAS_CORETYPE naming the
// set the CPU's feature flags support: same process, arguments and environment otherwise.
// Likewise when MIRRORED_CPU_SIMD caps the vector instructions below OpenBLAS's choice
// (kernels.h, cpu_simd_level): then the set of that level.
// Call first in main, before MPI_Init and before any thread starts.
#include <string>

namespace mirrored::cli {

void use_best_blas_core(char** argv);

// For `mirrored info`: the kernel set in use and, when mirrored chose it, what OpenBLAS
// had detected by itself.
std::string blas_core_description();

}  // namespace mirrored::cli
