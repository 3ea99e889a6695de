#pragma once
// on_failure = shrink at start-up: what must be switched on around MPI_Init so that a lost
// rank comes back to the survivors as an error (comm::PeerFailure) instead of ending the
// job, and the refusals of a job that could not survive one (comm/failure/ holds the ULFM
// calls themselves).
#include "mirrored/runtime/launcher.h"

namespace mirrored::runtime {

// Before MPI_Init: Open MPI's failure detector, so a stopped or hung rank, or a whole
// node's, is declared failed within half the collective timeout (before the watchdog's
// revoke at the full one); no closing fence in MPI_Finalize (a host's ranks lost, its
// daemon not); SIGPIPE ignored (a write to a lost peer must not end a survivor).
void switch_on_ulfm_before_mpi_init(double collective_timeout_s, const LauncherEnv& launcher);

// After MPI_Init: refuses srun (Slurm's PMIx plugin kills the whole step when a rank dies)
// and an MPI or launch without ULFM, alike on every rank (ExitCode::kUsage); then makes
// failures return as error codes on MPI_COMM_WORLD and every communicator duplicated from
// it, and, under `mirrored rank-agent`, keeps a lost runtime connection from ending the rank.
void switch_on_ulfm_after_mpi_init(const LauncherEnv& launcher);

}  // namespace mirrored::runtime
