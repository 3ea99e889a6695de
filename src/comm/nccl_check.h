#pragma once
// MIRRORED_NCCL_CHECK / _LOG: file:line, the call as text, NCCL's error string and its
// last-error detail, host and rank (see core/library_error.h).
#include <nccl.h>

#include "mirrored/core/library_error.h"
#include "mirrored/core/strings.h"

namespace mirrored::comm {
inline std::string nccl_error_text(ncclResult_t status) {
  const char* detail = ncclGetLastError(nullptr);
  return str_cat(ncclGetErrorString(status), " (", static_cast<int>(status), ")",
                 detail && *detail ? str_cat(": ", detail) : std::string());
}
}  // namespace mirrored::comm

#define MIRRORED_NCCL_CHECK(call)                                                                     \
  do {                                                                                                \
    const ncclResult_t nccl_status_ = (call);                                                         \
    if (nccl_status_ != ncclSuccess)                                                                  \
      ::mirrored::throw_library_error(__FILE__, __LINE__, #call, ::mirrored::comm::nccl_error_text(nccl_status_)); \
  } while (0)

#define MIRRORED_NCCL_LOG(call)                                                                       \
  do {                                                                                                \
    const ncclResult_t nccl_status_ = (call);                                                         \
    if (nccl_status_ != ncclSuccess)                                                                  \
      ::mirrored::log_library_error(__FILE__, __LINE__, #call, ::mirrored::comm::nccl_error_text(nccl_status_)); \
  } while (0)
