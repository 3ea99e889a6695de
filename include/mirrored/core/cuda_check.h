#pragma once
// MIRRORED_CUDA_CHECK(call): throws mirrored::Error with file:line, the call as text, the
// CUDA error name and message, host and rank. MIRRORED_CUDA_LOG(call) logs instead (for
// destructors). CUDA build only: include it from files compiled with MIRRORED_WITH_CUDA.
#include <cuda_runtime.h>

#include "mirrored/core/library_error.h"
#include "mirrored/core/strings.h"

namespace mirrored {
inline std::string cuda_error_text(cudaError_t status) {
  return str_cat(cudaGetErrorName(status), " (", static_cast<int>(status), "): ", cudaGetErrorString(status));
}
}  // namespace mirrored

#define MIRRORED_CUDA_CHECK(call)                                                                   \
  do {                                                                                              \
    const cudaError_t cuda_status_ = (call);                                                        \
    if (cuda_status_ != cudaSuccess)                                                                \
      ::mirrored::throw_library_error(__FILE__, __LINE__, #call, ::mirrored::cuda_error_text(cuda_status_)); \
  } while (0)

#define MIRRORED_CUDA_LOG(call)                                                                     \
  do {                                                                                              \
    const cudaError_t cuda_status_ = (call);                                                        \
    if (cuda_status_ != cudaSuccess)                                                                \
      ::mirrored::log_library_error(__FILE__, __LINE__, #call, ::mirrored::cuda_error_text(cuda_status_)); \
  } while (0)

// After a kernel launch: launch-configuration errors surface here, naming the kernel.
#define MIRRORED_CUDA_CHECK_LAUNCH(kernel_name)                                                     \
  do {                                                                                              \
    const cudaError_t cuda_status_ = cudaGetLastError();                                            \
    if (cuda_status_ != cudaSuccess)                                                                \
      ::mirrored::throw_library_error(__FILE__, __LINE__, "launch of " kernel_name,                 \
                                      ::mirrored::cuda_error_text(cuda_status_));                   \
  } while (0)
