#pragma once
// MIRRORED_CUDNN_CHECK / _LOG: file:line, the call as text, cuDNN's message, host and rank.
#include <cudnn.h>

#include "mirrored/core/library_error.h"
#include "mirrored/core/strings.h"

namespace mirrored::kernels::cuda {
inline std::string cudnn_error_text(cudnnStatus_t status) {
  return str_cat(cudnnGetErrorString(status), " (", static_cast<int>(status), ")");
}
}  // namespace mirrored::kernels::cuda

#define MIRRORED_CUDNN_CHECK(call)                                                                 \
  do {                                                                                             \
    const cudnnStatus_t cudnn_status_ = (call);                                                    \
    if (cudnn_status_ != CUDNN_STATUS_SUCCESS)                                                     \
      ::mirrored::throw_library_error(__FILE__, __LINE__, #call,                                   \
                                      ::mirrored::kernels::cuda::cudnn_error_text(cudnn_status_)); \
  } while (0)

#define MIRRORED_CUDNN_LOG(call)                                                                   \
  do {                                                                                             \
    const cudnnStatus_t cudnn_status_ = (call);                                                    \
    if (cudnn_status_ != CUDNN_STATUS_SUCCESS)                                                     \
      ::mirrored::log_library_error(__FILE__, __LINE__, #call,                                     \
                                    ::mirrored::kernels::cuda::cudnn_error_text(cudnn_status_));   \
  } while (0)
