#include "job_channel.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "mirrored/comm/failure/fault_tolerance.h"
#include "mirrored/comm/failure/mpi_check.h"
#include "mirrored/comm/failure/runtime_loss.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/core/process.h"

namespace mirrored::runtime {
namespace {
constexpr int kEndTag = 7101;
constexpr int32_t kEndOfTraining = 1;
// A spare's poll interval: 20 ms keeps it far under 1% of a core, and hears a loss (or
// Open MPI's heartbeat detector's news, whose period is at least 0.5 s) within 20 ms.
constexpr auto kPollInterval = std::chrono::milliseconds(20);
}  // namespace

JobChannel::JobChannel(MPI_Comm job) {
  MIRRORED_MPI_CHECK(MPI_Comm_dup(job, &comm_));
  MIRRORED_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  comm::track_communicator(comm_);
  MIRRORED_MPI_CHECK(MPI_Irecv(&message_, 1, MPI_INT32_T, MPI_ANY_SOURCE, kEndTag, comm_, &request_));
}

JobChannel::~JobChannel() {
  comm::untrack_communicator(comm_);
  if (request_ != MPI_REQUEST_NULL) {
    // Errors expected here (a revoked channel, a failed peer) say nothing new.
    (void)MPI_Cancel(&request_);
    (void)MPI_Request_free(&request_);
  }
  (void)MPI_Comm_free(&comm_);
}

bool JobChannel::poll() {
  if (request_ == MPI_REQUEST_NULL) return true;
  int done = 0;
  MIRRORED_MPI_CHECK(MPI_Test(&request_, &done, MPI_STATUS_IGNORE));
  return done && message_ == kEndOfTraining;
}

void JobChannel::wait_for_end(int64_t launcher_daemon) {
  while (!poll()) {
    if (comm::abandoned_by_launcher(launcher_daemon)) {
      rank_error("a spare's launcher is gone (mpirun ended the job): ending");
      const int status = static_cast<int>(ExitCode::kCommTimeout);
      report_exit_status(status);
      std::fflush(nullptr);
      std::_Exit(status);
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

// Training is over: a spare lost now changes nothing, so a failed send is a warning, and
// the others are still told (no revoke, which would call them into a recovery).
void JobChannel::announce_end(const std::vector<int>& ranks) {
  const int32_t end = kEndOfTraining;
  for (const int rank : ranks)
    if (const int status = MPI_Send(&end, 1, MPI_INT32_T, rank, kEndTag, comm_); status != MPI_SUCCESS)
      rank_warning(str_cat("spare job rank ", rank, " was lost as training ended (", comm::mpi_error_string(status), ")"));
}

}  // namespace mirrored::runtime
