#include "device_bootstrap.h"

#include "mirrored/comm/local_communicator.h"
#include "mirrored/core/error.h"

#ifdef MIRRORED_WITH_CUDA
#include <cuda_runtime.h>

#include "mirrored/comm/nccl_communicator.h"
#include "mirrored/core/cuda_check.h"
#endif

namespace mirrored::runtime {

std::unique_ptr<kernels::DeviceContext> start_device_context(int device) {
#ifdef MIRRORED_WITH_CUDA
  MIRRORED_CUDA_CHECK(cudaSetDevice(device));
#endif
  return std::make_unique<kernels::DeviceContext>(device);
}

std::unique_ptr<comm::Communicator> start_device_communicator(comm::Communicator& world, int device,
                                                              double collective_timeout_s, bool survive_failures) {
  if (world.size() == 1) return std::make_unique<comm::LocalCommunicator>();
#ifdef MIRRORED_WITH_CUDA
  return std::make_unique<comm::NcclCommunicator>(world, device, collective_timeout_s, survive_failures);
#else
  (void)collective_timeout_s;
  (void)survive_failures;
  throw Error(ExitCode::kUsage,
              str_cat("a NCCL communicator for cuda:", device, " needs CUDA, and this build of mirrored has no CUDA "
                      "support"),
              true);
#endif
}

}  // namespace mirrored::runtime
