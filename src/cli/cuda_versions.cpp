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

namespace mirrored::cli {

#ifdef MIRRORED_WITH_CUDA
#ifndef MIRRORED_CUDA_ARCHITECTURES
#define MIRRORED_CUDA_ARCHITECTURES "unknown"
#endif

namespace {
// CUDA encodes 1000 * major + 10 * minor.
std::string cuda_version_text(int version) { return str_cat(version / 1000, ".", version % 1000 / 10); }

// How a GPU of compute capability `cc` (e.g. 89) runs this binary's kernels, from the
// CMAKE_CUDA_ARCHITECTURES list it was built with ("80-real,90-real,90-virtual"): machine
// code of the same major version and a lower or equal minor runs as is; otherwise PTX of a
// lower or equal version is JIT-compiled at start-up; otherwise every kernel launch fails.
std::string coverage(const std::string& built, int cc) {
  std::string list = built;
  if (list.rfind("native: ", 0) == 0) list = list.substr(8);
  if (list == "native" || list == "unknown") return "built for the building machine's GPUs";
  bool machine_code = false, ptx = false;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find(',', start), list.size());
    const std::string entry = list.substr(start, end - start);
    start = end + 1;
    if (entry.empty()) continue;
    const int arch = std::atoi(entry.c_str());
    const bool real = entry.find("-virtual") == std::string::npos;
    const bool virt = entry.find("-real") == std::string::npos;
    // Architecture-specific targets (90a) run on exactly that architecture only.
    const bool specific = entry.find_first_not_of("0123456789") != std::string::npos &&
                          std::isalpha(static_cast<unsigned char>(entry[entry.find_first_not_of("0123456789")]));
    if (real && (specific ? arch == cc : arch / 10 == cc / 10 && arch <= cc)) machine_code = true;
    if (virt && !specific && arch <= cc) ptx = true;
  }
  if (machine_code) return "machine code";
  if (ptx) return "PTX, compiled by the driver at start-up";
  return "NO kernel image: rebuild with CUDA_ARCH=native or CUDA_ARCH=" + std::to_string(cc);
}

std::string architectures_row() {
  std::string row = MIRRORED_CUDA_ARCHITECTURES;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp props{};
    if (cudaGetDeviceProperties(&props, i) != cudaSuccess) continue;
    const int cc = props.major * 10 + props.minor;
    row += str_cat(i ? "; " : " (", "cuda:", i, " sm_", cc, ": ", coverage(MIRRORED_CUDA_ARCHITECTURES, cc));
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
