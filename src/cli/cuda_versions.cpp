// CUDA, cuDNN and NCCL versions: the one CLI file that talks to the CUDA libraries, so a
// CPU-only build compiles it to an empty list. Each row gives the version found at run time
// and the one compiled against: a mismatch there is a classic cause of start-up failures.
#include "library_versions.h"

#ifdef MIRRORED_WITH_CUDA
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>
#endif

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "mirrored/core/strings.h"
#include "mirrored/kernels/cuda_arch.h"

namespace mirrored::cli {

#ifdef MIRRORED_WITH_CUDA
#ifndef MIRRORED_CUDA_ARCHITECTURES
#define MIRRORED_CUDA_ARCHITECTURES "unknown"
#endif

namespace {
// CUDA encodes 1000 * major + 10 * minor.
std::string cuda_version_text(int version) { return str_cat(version / 1000, ".", version % 1000 / 10); }

// How a GPU of compute capability `cc` runs this binary's kernels: what the recorded list
// says (machine code or PTX) and what the runtime found when it looked for a kernel. Only
// the runtime decides "no kernel image": a list can be unreadable (a "native" build whose
// detected architectures were not recorded) while the kernels load.
std::string coverage(int device, int cc) {
  const kernels::KernelImage image = kernels::kernel_image_for(device);
  if (!image.loads)
    return str_cat("NO kernel image (", image.error, "): rebuild with CUDA_ARCH=native or CUDA_ARCH=", cc);
  switch (kernels::arch_coverage(MIRRORED_CUDA_ARCHITECTURES, cc)) {
    case kernels::ArchCoverage::kMachineCode: return "machine code";
    case kernels::ArchCoverage::kPtx: return "PTX, compiled by the driver at start-up";
    default: break;
  }
  return str_cat("kernels load (binary sm_", image.binary_version, ", PTX ", image.ptx_version, ")");
}

std::string architectures_row() {
  std::string row = MIRRORED_CUDA_ARCHITECTURES;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp props{};
    if (cudaGetDeviceProperties(&props, i) != cudaSuccess) continue;
    const int cc = props.major * 10 + props.minor;
    row += str_cat(i ? "; " : " (", "cuda:", i, " sm_", cc, ": ", coverage(i, cc));
  }
  if (count > 0) row += ")";
  return row;
}
}  // namespace

InfoRows cuda_library_rows() {
  int runtime = 0, driver = 0;
  const bool runtime_ok = cudaRuntimeGetVersion(&runtime) == cudaSuccess;
  const bool driver_ok = cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0;
  const size_t cudnn = cudnnGetVersion();
  int nccl = 0;
  const bool nccl_ok = ncclGetVersion(&nccl) == ncclSuccess;
  // cuDNN 9 encodes 10000 * major + 100 * minor + patch; NCCL >= 2.9 the same.
  auto triple = [](long long v) { return str_cat(v / 10000, ".", v % 10000 / 100, ".", v % 100); };
  return {{"cuda runtime", str_cat(runtime_ok ? cuda_version_text(runtime) : "unavailable", " (built with ",
                                   cuda_version_text(CUDART_VERSION), ")")},
          {"cuda driver", driver_ok ? cuda_version_text(driver) : "none (no NVIDIA driver on this host)"},
          {"cudnn", str_cat(triple(static_cast<long long>(cudnn)), " (built with ", CUDNN_MAJOR, ".", CUDNN_MINOR, ".",
                            CUDNN_PATCHLEVEL, ")")},
          {"nccl", str_cat(nccl_ok ? triple(nccl) : "unavailable", " (built with ", NCCL_MAJOR, ".", NCCL_MINOR, ".",
                           NCCL_PATCH, ")")},
          {"cuda archs", architectures_row()}};
}
#else
InfoRows cuda_library_rows() { return {}; }
#endif

}  // namespace mirrored::cli
