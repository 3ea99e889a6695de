#include "ulfm_switches.h"

#include <mpi.h>

#include <algorithm>
#include <string>

#include "mirrored/comm/failure/fault_tolerance.h"
#include "mirrored/comm/failure/mpi_check.h"
#include "mirrored/comm/failure/runtime_loss.h"
#include "mirrored/core/error.h"

namespace mirrored::runtime {

void switch_on_ulfm_before_mpi_init(double collective_timeout_s, const LauncherEnv& launcher) {
  comm::enable_failure_detector(
      comm::detection_seconds(collective_timeout_s, std::max(1, launcher.mpirun_local_size)));
  comm::skip_finalize_fence();
  comm::keep_collectives_fault_aware();
  comm::ignore_broken_pipes();
}

void switch_on_ulfm_after_mpi_init(const LauncherEnv& launcher) {
  // Every rank reads the same binary and launcher variables: all refuse alike.
  // Under srun --mpi=pmix, Slurm's PMIx plugin answers a dead rank by killing the whole
  // job step (SIGKILL), --kill-on-bad-exit=0 or not (it.slurm_shrink): nothing to survive.
  if (launcher.kind == LauncherEnv::Kind::kSlurm)
    throw Error(ExitCode::kUsage,
                "on_failure = shrink cannot work under srun: Slurm's PMIx plugin kills the whole job step "
                "when a rank dies (also with --kill-on-bad-exit=0); launch with `mpirun --with-ft ulfm` "
                "inside the allocation (slurm/train-cpu.sbatch and slurm/train.sbatch do so for "
                "on_failure = shrink unless MIRRORED_LAUNCHER=srun)",
                true);
  const std::string missing = comm::fault_tolerance().missing();
  if (!missing.empty()) throw Error(ExitCode::kUsage, "on_failure = shrink: " + missing, true);
  // Failures come back as error codes (comm::PeerFailure), for the world and for every
  // communicator duplicated from it (the watchdog's among them), instead of ending the job.
  MIRRORED_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  // Started by `mirrored rank-agent` (the launch scripts): a lost node's daemon, which
  // makes Open MPI's runtime end the job, need not end the survivors.
  comm::watch_runtime_connection();
}

}  // namespace mirrored::runtime
