#include "mirrored/core/cuda_memory.h"

#include "mirrored/core/error.h"
#include "mirrored/core/log.h"

#ifdef MIRRORED_WITH_CUDA
#include "mirrored/core/cuda_check.h"
#include "mirrored/core/cuda_resources.h"
#endif

namespace mirrored {

#ifdef MIRRORED_WITH_CUDA
void* cuda_allocate(size_t bytes, int device_index) {
  MIRRORED_CUDA_CHECK(cudaSetDevice(device_index));
  void* ptr = nullptr;
  MIRRORED_CUDA_CHECK(cudaMalloc(&ptr, bytes == 0 ? 1 : bytes));
  return ptr;
}
void cuda_free(void* ptr) noexcept {
  if (ptr) MIRRORED_CUDA_LOG(cudaFree(ptr));
}
void cuda_memset_zero(void* ptr, size_t bytes, int device) {
  MIRRORED_CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, compute_stream(device)));
}
void cuda_copy_on_device(void* dst, const void* src, size_t bytes, int device) {
  MIRRORED_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, compute_stream(device)));
}
void cuda_copy(void* dst, const void* src, size_t bytes) {
  MIRRORED_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
}
int cuda_device_count(std::string* reason) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    if (!reason) return 0;
    // CUDA says "driver version is insufficient" (error 35) also where no driver is
    // installed at all, the usual case on a CPU machine: cudaDriverGetVersion tells the two
    // apart (0: no driver).
    int driver = 0;
    if (status == cudaErrorInsufficientDriver && cudaDriverGetVersion(&driver) == cudaSuccess && driver == 0)
      *reason = "no NVIDIA driver";
    else if (status == cudaErrorNoDevice)
      *reason = "no NVIDIA GPU";
    else if (status == cudaErrorInsufficientDriver)
      *reason = str_cat("the NVIDIA driver supports CUDA up to ", driver / 1000, ".", driver % 1000 / 10,
                        ", older than the CUDA ", CUDART_VERSION / 1000, ".", CUDART_VERSION % 1000 / 10,
                        " this build needs: update the driver");
    else
      *reason = str_cat("cudaGetDeviceCount: ", cudaGetErrorString(status), " (error ", static_cast<int>(status), ")");
    return 0;
  }
  if (count == 0 && reason) *reason = "no CUDA device visible";
  return count;
}
#else
namespace {
[[noreturn]] void no_cuda() {
  throw Error(ExitCode::kUsage, "this build of mirrored has no CUDA support (configure with MIRRORED_CUDA=ON)", true);
}
}  // namespace
void* cuda_allocate(size_t, int) { no_cuda(); }
void cuda_free(void*) noexcept {}
void cuda_memset_zero(void*, size_t, int) { no_cuda(); }
void cuda_copy_on_device(void*, const void*, size_t, int) { no_cuda(); }
void cuda_copy(void*, const void*, size_t) { no_cuda(); }
int cuda_device_count(std::string* reason) {
  if (reason) *reason = "built without CUDA";
  return 0;
}
#endif

}  // namespace mirrored
