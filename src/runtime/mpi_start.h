#pragma once
// Starting MPI: the one call of MPI_Init_thread in mirrored (the Runtime makes it).
#include "mirrored/runtime/runtime.h"

namespace mirrored::runtime {

// kMpi or kLocal for `requested`: MIRRORED_LAUNCH (auto, mpi or local) decides when the
// options leave it at kAuto, then the launcher's variables (Runtime::launched_by_mpi).
// Throws InputError (ExitCode::kUsage) for any other MIRRORED_LAUNCH.
Launch resolve_launch(Launch requested);

// Throws when MPI is already initialised: only the Runtime may start it, once. Called before
// anything is set for MPI_Init, so a refused start changes nothing in the process.
void refuse_started_mpi();

// MPI_Init_thread at MPI_THREAD_MULTIPLE: communication runs on its own thread while the
// main thread computes and also calls collectives (loss reduction), so every thread may
// call MPI. A lower level is warned about, not refused: communication then does not
// overlap compute.
void init_mpi_thread_multiple(int& argc, char**& argv);

}  // namespace mirrored::runtime
