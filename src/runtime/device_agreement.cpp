#include "device_agreement.h"

#include <string>

#include "mirrored/core/cuda_memory.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"

#ifdef MIRRORED_WITH_CUDA
#include <cuda_runtime.h>

#include "mirrored/core/cuda_check.h"
#endif

namespace mirrored::runtime {
namespace {

// A name for the physical GPU that survives CUDA_VISIBLE_DEVICES renumbering (each rank
// may see its own GPU as device 0): the UUID, else the PCI bus id.
std::string physical_gpu_id(int index) {
#ifdef MIRRORED_WITH_CUDA
  cudaDeviceProp props{};
  MIRRORED_CUDA_CHECK(cudaGetDeviceProperties(&props, index));
  std::string id = "GPU-";
  static const char* hex = "0123456789abcdef";
  for (char byte : props.uuid.bytes) {
    id += hex[(static_cast<unsigned char>(byte) >> 4) & 0xf];
    id += hex[static_cast<unsigned char>(byte) & 0xf];
  }
  return id;
#else
  return str_cat("cuda:", index);
#endif
}

// Collective; empty when every GPU rank has its own GPU, else names the first clash
// (identically on every rank). CPU ranks send an empty id.
std::string gpu_sharing(comm::Communicator& world, const Cluster& cluster, const std::string& my_gpu) {
  const auto gpus = world.allgather_strings(my_gpu.empty() ? std::string() : cluster.host() + "|" + my_gpu);
  for (size_t a = 0; a < gpus.size(); ++a) {
    for (size_t b = a + 1; b < gpus.size(); ++b) {
      if (gpus[a].empty() || gpus[a] != gpus[b]) continue;
      const auto& pa = cluster.placements()[a];
      const auto& pb = cluster.placements()[b];
      return str_cat("ranks ", a, " and ", b, " on ", pa.host, " would share one GPU (", pa.device, " and ", pb.device,
                     " are both ", gpus[a].substr(gpus[a].find('|') + 1),
                     "): run one rank per GPU, or give each rank its own with CUDA_VISIBLE_DEVICES or "
                     "MIRRORED_CUDA_DEVICE");
    }
  }
  return {};
}

// device = auto on rank 0, which found no GPU it could use: why, for its message.
std::string why_rank_0_has_no_gpu() {
  std::string reason;
  cuda_device_count(&reason);
  return reason.empty() ? "none visible" : reason;
}

}  // namespace

Device agree_on_devices(DeviceChoice choice, Device mine, comm::Communicator& world, Cluster& cluster) {
  cluster.gather_devices(world, mine.str());
  const std::string clash = gpu_sharing(world, cluster, mine.is_cuda() ? physical_gpu_id(mine.index) : "");
  if (!clash.empty() && choice == DeviceChoice::kCuda) throw Error(ExitCode::kUsage, clash, true);
  // auto: GPUs only when every rank has its own; a mixed job would mix communicators.
  const int all_gpu =
      world.allreduce_value<int32_t>(mine.is_cuda() && clash.empty() ? 1 : 0, comm::ReduceOp::kMin);
  if (!all_gpu && mine.is_cuda()) {
    chief_info(clash.empty() ? "device = auto: not every rank has a GPU; computing on the CPU"
                             : "device = auto: " + clash + "; computing on the CPU");
    return Device::cpu();
  }
  if (choice == DeviceChoice::kAuto && all_gpu) {
    chief_info("device = auto: one GPU per rank (device = cpu to compute on the CPU)");
  } else if (choice == DeviceChoice::kAuto && !mine.is_cuda() && world.rank() == 0) {
    const std::string why = why_rank_0_has_no_gpu();
    // A machine without an NVIDIA driver is a CPU machine: one line in mirrored's words.
    chief_info(why == "no NVIDIA driver" ? std::string("no NVIDIA driver: training on the CPU")
                                         : str_cat("device = auto: no usable GPU on rank 0 (", why,
                                                   "); computing on the CPU"));
  }
  return mine;
}

}  // namespace mirrored::runtime
