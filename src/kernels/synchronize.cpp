#include "mirrored/kernels/synchronize.h"

#ifdef MIRRORED_WITH_CUDA
#include "mirrored/core/cuda_check.h"
#include "mirrored/core/cuda_resources.h"
#endif

namespace mirrored::kernels {

void synchronize(Device device) {
#ifdef MIRRORED_WITH_CUDA
  if (device.is_cuda()) MIRRORED_CUDA_CHECK(cudaStreamSynchronize(compute_stream(device.index)));
#else
  (void)device;
#endif
}

}  // namespace mirrored::kernels
