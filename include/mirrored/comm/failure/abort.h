#pragma once
// The one function that ends a job early. The runtime (fatal errors reaching main), the
// collective watchdog (MPI timeouts) and the NCCL communicator (device timeouts) all end
// the job through it, so every rank exits with the same code and no peer is left hanging.
#include <string>

#include "mirrored/core/error.h"

namespace mirrored::comm {

// Prints `message` (when not empty) as this rank's error line, flushes stdout and stderr,
// then ends every rank of the job with `code`: MPI_Abort when MPI is up with more than one
// rank, _Exit otherwise. Safe from any thread, before MPI starts and after it has ended.
[[noreturn]] void abort_job(ExitCode code, const std::string& message = {});

// Runs once, after the message and before the job ends, with the exit code: the watchdog
// installs the flight recorder's dump here, so an unexpected failure leaves a trace.
// nullptr removes it.
void set_abort_hook(void (*hook)(ExitCode));

}  // namespace mirrored::comm
