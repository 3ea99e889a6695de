#include "mirrored/runtime/gpu_info.h"

#include "mirrored/core/cuda_memory.h"
#include "mirrored/core/process.h"
#include "mirrored/core/strings.h"

#ifdef MIRRORED_WITH_CUDA
#include <cuda_runtime.h>
#include <cudnn.h>

#include "mirrored/comm/nccl_communicator.h"
#endif

namespace mirrored::runtime {
namespace {
#ifdef MIRRORED_WITH_CUDA
std::string cuda_version_text(int v) { return str_cat(v / 1000, ".", (v % 1000) / 10); }
#endif
}  // namespace

std::string cuda_versions_string() {
#ifdef MIRRORED_WITH_CUDA
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  const cudaError_t driver_status = cudaDriverGetVersion(&driver);
  const std::string driver_text = driver_status == cudaSuccess && driver > 0 ? cuda_version_text(driver) : "none";
  const size_t cudnn = cudnnGetVersion();  // 91900 for 9.19.0
  const int nccl = comm::NcclCommunicator::version();  // 22809 for 2.28.9
  return str_cat("CUDA runtime ", cuda_version_text(runtime), " (built with ", cuda_version_text(CUDART_VERSION),
                 "), driver ", driver_text, ", cuDNN ", cudnn / 10000, ".", (cudnn % 10000) / 100, ".", cudnn % 100,
                 ", NCCL ", nccl / 10000, ".", (nccl % 10000) / 100, ".", nccl % 100);
#else
  return "not built (configure with -DMIRRORED_CUDA=ON)";
#endif
}

std::string local_gpus_string() {
  std::string reason;
  const int count = cuda_device_count(&reason);
  if (count == 0) return str_cat("none (", reason, ")");
  std::string out = str_cat(count, ":");
#ifdef MIRRORED_WITH_CUDA
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp props{};
    if (cudaGetDeviceProperties(&props, i) != cudaSuccess) continue;
    out += str_cat(i ? "," : "", " cuda:", i, " ", props.name, " (", props.totalGlobalMem >> 30, " GiB, sm_",
                   props.major, props.minor, ")");
  }
#endif
  return out;
}

std::string gpus_per_rank(comm::Communicator& world) {
  const auto all = world.allgather_strings(str_cat(local_hostname(), "  ", local_gpus_string()));
  std::string out;
  for (size_t r = 0; r < all.size(); ++r) out += str_cat(r ? "\n" : "", "  rank ", r, "   ", all[r]);
  return out;
}

}  // namespace mirrored::runtime
