#include "mirrored/comm/failure/fault_tolerance.h"

#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's extensions; OMPI_HAVE_MPI_EXT_FTMPI when ULFM is built in
#endif

#include <signal.h>
#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

#include "mirrored/comm/failure/mpi_check.h"
#include "mirrored/core/strings.h"

#if defined(OMPI_HAVE_MPI_EXT_FTMPI) && OMPI_HAVE_MPI_EXT_FTMPI
#define MIRRORED_HAVE_ULFM 1
#else
#define MIRRORED_HAVE_ULFM 0
#endif

namespace mirrored::comm {
namespace {

std::string compiled_mpi() {
#if defined(OPEN_MPI) && defined(OMPI_MAJOR_VERSION)
  return str_cat("Open MPI ", OMPI_MAJOR_VERSION, ".", OMPI_MINOR_VERSION, ".", OMPI_RELEASE_VERSION);
#else
  return str_cat("an MPI ", MPI_VERSION, ".", MPI_SUBVERSION, " other than Open MPI");
#endif
}

// mpirun --with-ft ulfm (and --mca mpi_ft_enable 1) hand the ranks this MCA parameter.
bool enabled_by_launcher() {
  const char* value = std::getenv("OMPI_MCA_mpi_ft_enable");
  if (!value) return false;
  const std::string v = value;
  return v == "1" || v == "true" || v == "yes" || v == "enabled";
}

bool enabled() {
  static const bool on = MIRRORED_HAVE_ULFM && enabled_by_launcher();
  return on;
}

// The job's communicators, revoked together: guarded, since the communication thread and
// the main thread may both see a failure.
std::mutex tracked_mutex;
std::atomic<uint64_t> revocation_count{0};
std::vector<MPI_Comm>& tracked() {
  static std::vector<MPI_Comm> comms;
  return comms;
}

bool is_failure_class(int status) {
#if MIRRORED_HAVE_ULFM
  int error_class = 0;
  if (MPI_Error_class(status, &error_class) != MPI_SUCCESS) return false;
  return error_class == MPIX_ERR_PROC_FAILED || error_class == MPIX_ERR_PROC_FAILED_PENDING ||
         error_class == MPIX_ERR_REVOKED;
#else
  (void)status;
  return false;
#endif
}

// Whether one of the job's communicators knows a failed process or is revoked. Open MPI
// 5.0's nonblocking collectives (libnbc) lose the error class: a schedule that a peer's
// failure aborted ("NBC_Progress: an error 75 was found during schedule") completes its
// request with MPI_ERR_OTHER, not MPI_ERR_PROC_FAILED (seen in it.shrink_host, about 1 run
// in 30, the hierarchical all-reduce's leaders' stage as a host's ranks were declared
// failed). Such an error is that failure when the communicators know of one.
bool failure_known() {
#if MIRRORED_HAVE_ULFM
  std::lock_guard<std::mutex> lock(tracked_mutex);
  for (MPI_Comm comm : tracked()) {
    int revoked = 0;
    if (MPIX_Comm_is_revoked(comm, &revoked) == MPI_SUCCESS && revoked) return true;
    MPI_Group failed = MPI_GROUP_NULL;
    if (MPIX_Comm_get_failed(comm, &failed) != MPI_SUCCESS) continue;
    int size = 0;
    MPI_Group_size(failed, &size);
    MPI_Group_free(&failed);
    if (size > 0) return true;
  }
#endif
  return false;
}

}  // namespace

FaultTolerance fault_tolerance() {
  FaultTolerance ft;
  ft.built = MIRRORED_HAVE_ULFM;
  ft.enabled = ft.built && enabled_by_launcher();
  ft.mpi_headers = compiled_mpi();
  return ft;
}

std::string FaultTolerance::describe() const {
  if (!built)
    return str_cat("not available (built against ", mpi_headers,
                   ", no ULFM extension): on_failure = shrink needs Open MPI 5 with ULFM (launch/install_openmpi.sh)");
  return str_cat("available (", mpi_headers, ", ftmpi extension); ",
                 enabled ? "enabled for this job" : "off for this job (launch with mpirun --with-ft ulfm)");
}

std::string FaultTolerance::missing() const {
  if (!built)
    return str_cat("this binary was built against ", mpi_headers,
                   ", which has no ULFM fault tolerance (revoke, shrink, agree); on_failure = shrink needs Open MPI 5 "
                   "or later with its ftmpi extension: run launch/install_openmpi.sh and rebuild with launch/build.sh");
  if (!enabled)
    return "ULFM fault tolerance is off for this job: launch it with `mpirun --with-ft ulfm` (launch/local.sh, "
           "launch/multinode.sh and the slurm/ scripts add it when the command line or the --config file sets "
           "on_failure = shrink)";
  return {};
}

void throw_mpi_error(int status, const std::string& where_and_call) {
  const std::string message = str_cat(where_and_call, ": ", mpi_error_string(status));
  if (is_failure_class(status) || (enabled() && failure_known())) {
    revoke_tracked_communicators();
    throw PeerFailure(message, mpi_error_string(status));
  }
  throw Error(ExitCode::kFailure, message);
}

bool is_peer_failure(int status) { return status != MPI_SUCCESS && enabled() && is_failure_class(status); }

void track_communicator(MPI_Comm comm) {
  if (!enabled() || comm == MPI_COMM_NULL) return;
  std::lock_guard<std::mutex> lock(tracked_mutex);
  tracked().push_back(comm);
}

void untrack_communicator(MPI_Comm comm) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(tracked_mutex);
  auto& comms = tracked();
  comms.erase(std::remove(comms.begin(), comms.end(), comm), comms.end());
}

void revoke_tracked_communicators() {
#if MIRRORED_HAVE_ULFM
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(tracked_mutex);
  // Revoking twice (a peer did already) is harmless; errors here change nothing.
  for (MPI_Comm comm : tracked()) MPIX_Comm_revoke(comm);
  ++revocation_count;
#endif
}

uint64_t revocations() { return revocation_count.load(); }

bool note_failure(int status) {
  if (status == MPI_SUCCESS || !enabled() || !is_failure_class(status)) return false;
  revoke_tracked_communicators();
  return true;
}

double detection_seconds(double collective_timeout_s, int ranks_per_node) {
  if (collective_timeout_s <= 0) return 0;  // no timeout: Open MPI's default
  return std::max(2.0, collective_timeout_s / (2.0 * std::max(1, ranks_per_node)));
}

void enable_failure_detector(double detection_seconds) {
  if (!std::getenv("OMPI_MCA_mpi_ft_detector")) setenv("OMPI_MCA_mpi_ft_detector", "true", 1);
  if (detection_seconds <= 0 || std::getenv("OMPI_MCA_mpi_ft_detector_timeout")) return;
  setenv("OMPI_MCA_mpi_ft_detector_timeout", std::to_string(detection_seconds).c_str(), 1);
  if (!std::getenv("OMPI_MCA_mpi_ft_detector_period"))
    setenv("OMPI_MCA_mpi_ft_detector_period", std::to_string(detection_seconds / 4).c_str(), 1);
}

void ignore_broken_pipes() { ::signal(SIGPIPE, SIG_IGN); }

void skip_finalize_fence() {
  if (!std::getenv("OMPI_MCA_async_mpi_finalize")) setenv("OMPI_MCA_async_mpi_finalize", "true", 1);
}

void keep_collectives_fault_aware() {
  for (const char* collective : {"allreduce", "bcast", "reduce", "allgather"}) {
    const std::string variable = str_cat("OMPI_MCA_coll_han_use_simple_", collective);
    if (!std::getenv(variable.c_str())) setenv(variable.c_str(), "true", 1);
  }
}

bool end_lost_process(int64_t pid, int rank) {
  const char* mine = std::getenv("PMIX_NAMESPACE");
  if (pid <= 0 || !mine) return false;
  std::ifstream file(str_cat("/proc/", pid, "/environ"), std::ios::binary);
  if (!file) return false;  // gone already
  const std::string environ((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  auto has = [&](const std::string& entry) {
    const std::string needle = entry + '\0';
    return environ.compare(0, needle.size(), needle) == 0 || environ.find('\0' + needle) != std::string::npos;
  };
  if (!has(str_cat("PMIX_NAMESPACE=", mine)) || !has(str_cat("PMIX_RANK=", rank))) return false;
  return kill(static_cast<pid_t>(pid), SIGKILL) == 0;
}

MPI_Comm shrink_communicator(MPI_Comm comm) {
#if MIRRORED_HAVE_ULFM
  MPI_Comm survivors = MPI_COMM_NULL;
  MIRRORED_MPI_CHECK(MPIX_Comm_shrink(comm, &survivors));
  MIRRORED_MPI_CHECK(MPI_Comm_set_errhandler(survivors, MPI_ERRORS_RETURN));
  int flag = 1;
  MIRRORED_MPI_CHECK(MPIX_Comm_agree(survivors, &flag));
  return survivors;
#else
  (void)comm;
  throw Error(ExitCode::kFailure, "shrink_communicator: this binary was built without ULFM");
#endif
}

}  // namespace mirrored::comm
