// Whether the runtime has code for a device: one kernel compiled with the flags every kernel
// of the library gets, looked up for that device.
#include <cuda_runtime.h>

#include "mirrored/kernels/cuda_arch.h"

namespace mirrored::kernels {
namespace {
__global__ void kernel_image_probe(int* out) {
  if (out) *out = 1;
}
}  // namespace

KernelImage kernel_image_for(int device) {
  KernelImage image;
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
  cudaError_t status = cudaSetDevice(device);
  cudaFuncAttributes attributes{};
  if (status == cudaSuccess) status = cudaFuncGetAttributes(&attributes, kernel_image_probe);
  if (status == cudaSuccess) {
    image.loads = true;
    image.binary_version = attributes.binaryVersion;
    image.ptx_version = attributes.ptxVersion;
  } else {
    image.error = cudaGetErrorString(status);
    (void)cudaGetLastError();  // the error is reported here; later calls must not see it
  }
  if (previous >= 0) (void)cudaSetDevice(previous);
  return image;
}

}  // namespace mirrored::kernels
