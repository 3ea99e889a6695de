#include "mirrored/comm/failure/abort.h"

#include <mpi.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "mirrored/comm/failure/runtime_loss.h"
#include "mirrored/core/log.h"

namespace mirrored::comm {
namespace {
std::atomic<void (*)(ExitCode)> g_abort_hook{nullptr};
}  // namespace

void set_abort_hook(void (*hook)(ExitCode)) { g_abort_hook = hook; }

void abort_job(ExitCode code, const std::string& message) {
  if (!message.empty()) rank_error(message);
  std::fflush(stdout);
  std::fflush(stderr);
  if (auto* hook = g_abort_hook.exchange(nullptr)) hook(code);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  int size = 1;
  if (initialized && !finalized) MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > 1) {
    relay_abort_to_survivors();  // only while ranks outlive a lost node's runtime
    MPI_Abort(MPI_COMM_WORLD, static_cast<int>(code));
  }
  std::_Exit(static_cast<int>(code));
}

}  // namespace mirrored::comm
