#pragma once
// MIRRORED_MPI_CHECK(call): throws mirrored::Error with file:line, the call as text, MPI's
// error string, host and rank (comm::PeerFailure when a peer failed: fault_tolerance.h).
// MIRRORED_MPI_LOG(call) logs instead (for destructors).
#include <mpi.h>

#include <string>

#include "mirrored/core/error.h"
#include "mirrored/core/log.h"

namespace mirrored::comm {
std::string mpi_error_string(int code);
[[noreturn]] void throw_mpi_error(int status, const std::string& where_and_call);  // fault_tolerance.h

// A multiple-completion call (MPI_Testall, MPI_Waitall) reports a failed request as
// MPI_ERR_IN_STATUS; the cause (a failed peer, say) is in that request's status. Returns it,
// or `status` itself for any other result.
inline int request_error(int status, const MPI_Status* statuses, int count) {
  if (status != MPI_ERR_IN_STATUS) return status;
  for (int i = 0; i < count; ++i)
    if (statuses[i].MPI_ERROR != MPI_SUCCESS && statuses[i].MPI_ERROR != MPI_ERR_PENDING) return statuses[i].MPI_ERROR;
  return status;
}
}

#define MIRRORED_MPI_CHECK(call)                                                              \
  do {                                                                                        \
    const int mpi_status_ = (call);                                                           \
    if (mpi_status_ != MPI_SUCCESS)                                                           \
      ::mirrored::comm::throw_mpi_error(mpi_status_, ::mirrored::where(__FILE__, __LINE__, #call)); \
  } while (0)

#define MIRRORED_MPI_LOG(call)                                                                \
  do {                                                                                        \
    const int mpi_status_ = (call);                                                           \
    if (mpi_status_ != MPI_SUCCESS)                                                           \
      ::mirrored::rank_warning(::mirrored::where(                                             \
          __FILE__, __LINE__, ::mirrored::str_cat(#call, ": ", ::mirrored::comm::mpi_error_string(mpi_status_)))); \
  } while (0)
