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

// Ends this rank after an error that every rank of the job reaches alike: an InputError
// (Error::uniform: a bad configuration, a checkpoint of another model, a malformed data
// file, each found the same way on every rank or decided by the chief and broadcast). Each
// rank finalises MPI and exits with `code`, so the launcher ends the job with that code and
// without MPI_Abort's banner; no flight recorder dump (nothing unexpected happened). A
// rank whose MPI_Finalize has not returned after `grace_s` (a peer did not reach the error
// after all) prints `unprinted` (the error, when this rank left its printing to rank 0) and
// exits with `code` anyway, which ends the job through the launcher. Before MPI starts, a
// rank with `unprinted` waits 2 s before it exits, so rank 0's message gets out. From here on,
// abort_job on another thread (a watchdog seeing its peers go) only exits this rank.
[[noreturn]] void end_job_alike(ExitCode code, const std::string& unprinted = {}, double grace_s = 10.0);

// Runs in end_job_alike before MPI_Finalize, on the thread ending the job: stops the
// background threads that call MPI (the watchdog's heartbeats), which an error unwinding
// past their owner left running. nullptr removes it.
void set_quiesce_hook(void (*hook)());

// Runs once, after the message and before the job ends, with the exit code: the watchdog
// installs the flight recorder's dump here, so an unexpected failure leaves a trace.
// nullptr removes it.
void set_abort_hook(void (*hook)(ExitCode));

}  // namespace mirrored::comm
