#include "mpi_start.h"

#include <mpi.h>

#include <cstdlib>
#include <string>

#include "mirrored/comm/failure/mpi_check.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"

namespace mirrored::runtime {

namespace {

// MIRRORED_LAUNCH, where the options leave the choice open (kAuto).
Launch launch_from_env(Launch requested) {
  const char* value = std::getenv("MIRRORED_LAUNCH");
  if (requested != Launch::kAuto || !value || !*value) return requested;
  const std::string choice = value;
  if (choice == "mpi") return Launch::kMpi;
  if (choice == "local") return Launch::kLocal;
  if (choice == "auto") return Launch::kAuto;
  throw InputError(str_cat("MIRRORED_LAUNCH='", choice, "': expected one of auto, mpi, local"), ExitCode::kUsage);
}

}  // namespace

Launch resolve_launch(Launch requested) {
  const Launch launch = launch_from_env(requested);
  if (launch != Launch::kAuto) return launch;
  return Runtime::launched_by_mpi() ? Launch::kMpi : Launch::kLocal;
}

void refuse_started_mpi() {
  int initialized = 0;
  MIRRORED_MPI_CHECK(MPI_Initialized(&initialized));
  MIRRORED_CHECK(!initialized, "MPI is already initialised: only the Runtime may start it");
}

void init_mpi_thread_multiple(int& argc, char**& argv) {
  int thread_level = 0;
  MIRRORED_MPI_CHECK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &thread_level));
  if (thread_level < MPI_THREAD_MULTIPLE) {
    rank_warning(str_cat("MPI provides thread level ", thread_level,
                         " (< MPI_THREAD_MULTIPLE): communication will not overlap with compute"));
  }
}

}  // namespace mirrored::runtime
