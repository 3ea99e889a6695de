// CUDA, cuDNN and NCCL versions: the one CLI file that talks to the CUDA libraries, so a
// CPU-only build compiles it to an empty list. Each row gives the version found at run time
// and the one compiled against: a mismatch there is a classic cause of start-up failures.
#include "library_versions.h"

#ifdef MIRRORED_WITH_CUDA
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>
#endif

#include "mirrored/core/strings.h"

namespace mirrored::cli {

#ifdef MIRRORED_WITH_CUDA
namespace {
// CUDA encodes 1000 * major + 10 * minor.
std::string cuda_version_text(int version) { return str_cat(version / 1000, ".", version % 1000 / 10); }
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
                           NCCL_PATCH, ")")}};
}
#else
InfoRows cuda_library_rows() { return {}; }
#endif

}  // namespace mirrored::cli
