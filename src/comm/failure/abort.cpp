#include "mirrored/comm/failure/abort.h"

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "mirrored/comm/failure/runtime_loss.h"
#include "mirrored/core/log.h"

namespace mirrored::comm {
namespace {
std::atomic<void (*)(ExitCode)> g_abort_hook{nullptr};
std::atomic<void (*)()> g_quiesce_hook{nullptr};
std::atomic<bool> g_ending_alike{false};  // end_job_alike has begun on this rank

bool mpi_running() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}
}  // namespace

void set_abort_hook(void (*hook)(ExitCode)) { g_abort_hook = hook; }
void set_quiesce_hook(void (*hook)()) { g_quiesce_hook = hook; }

void abort_job(ExitCode code, const std::string& message) {
  if (!message.empty()) rank_error(message);
  std::fflush(stdout);
  std::fflush(stderr);
  if (g_ending_alike) std::_Exit(static_cast<int>(code));  // the job is ending alike: no abort
  if (auto* hook = g_abort_hook.exchange(nullptr)) hook(code);
  int size = 1;
  if (mpi_running()) MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > 1) {
    relay_abort_to_survivors();  // only while ranks outlive a lost node's runtime
    MPI_Abort(MPI_COMM_WORLD, static_cast<int>(code));
  }
  std::_Exit(static_cast<int>(code));
}

void end_job_alike(ExitCode code, const std::string& unprinted, double grace_s) {
  g_ending_alike = true;
  std::fflush(stdout);
  std::fflush(stderr);
  if (mpi_running()) {
    std::thread([code, unprinted, grace_s] {
      std::this_thread::sleep_for(std::chrono::duration<double>(grace_s));
      if (!unprinted.empty()) rank_error(unprinted);
      std::fflush(stdout);
      std::fflush(stderr);
      std::_Exit(static_cast<int>(code));
    }).detach();
    if (auto* quiesce = g_quiesce_hook.exchange(nullptr)) quiesce();
    MPI_Finalize();  // returns once every rank is here: rank 0 has printed the error
  } else if (!unprinted.empty()) {
    // Before MPI (a bad command line): nothing waits for rank 0, and the launcher ends the
    // job at the first non-zero exit. Give rank 0 a moment to print the error first.
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(static_cast<int>(code));
}

}  // namespace mirrored::comm
