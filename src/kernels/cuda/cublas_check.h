#pragma once
// MIRRORED_CUBLAS_CHECK / _LOG: file:line, the call as text, cuBLAS's status name and
// message, host and rank (see core/library_error.h).
#include <cublas_v2.h>

#include "mirrored/core/library_error.h"
#include "mirrored/core/strings.h"

namespace mirrored::kernels::cuda {
inline std::string cublas_error_text(cublasStatus_t status) {
  return str_cat(cublasGetStatusName(status), " (", static_cast<int>(status), "): ", cublasGetStatusString(status));
}
}  // namespace mirrored::kernels::cuda

#define MIRRORED_CUBLAS_CHECK(call)                                                                  \
  do {                                                                                               \
    const cublasStatus_t cublas_status_ = (call);                                                    \
    if (cublas_status_ != CUBLAS_STATUS_SUCCESS)                                                     \
      ::mirrored::throw_library_error(__FILE__, __LINE__, #call,                                     \
                                      ::mirrored::kernels::cuda::cublas_error_text(cublas_status_)); \
  } while (0)

#define MIRRORED_CUBLAS_LOG(call)                                                                    \
  do {                                                                                               \
    const cublasStatus_t cublas_status_ = (call);                                                    \
    if (cublas_status_ != CUBLAS_STATUS_SUCCESS)                                                     \
      ::mirrored::log_library_error(__FILE__, __LINE__, #call,                                       \
                                    ::mirrored::kernels::cuda::cublas_error_text(cublas_status_));   \
  } while (0)
