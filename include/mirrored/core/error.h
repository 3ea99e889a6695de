#pragma once
// One exception type for the whole project. The exit code it carries is the process exit
// status documented in the README; `uniform` marks errors that every rank raises in the
// same way (a bad config or data file), so the top level reports them once, from rank 0.
#include <stdexcept>
#include <string>

#include "mirrored/core/strings.h"

namespace mirrored {

enum class ExitCode : int {
  kOk = 0,
  kFailure = 1,        // an unexpected error (a bug, an OS or library failure)
  kUsage = 2,          // bad command line or config value
  kBadInput = 3,       // a data file is missing, unreadable or malformed
  kCheckpoint = 4,     // no valid checkpoint could be read or written
  kCommTimeout = 5,    // a collective did not finish in time; a peer died or stalled
  kNonFinite = 6,      // the loss or a gradient became NaN/Inf
  kPreempted = 7,      // stopped on a preemption signal after writing a checkpoint: requeue to resume
  kTooFewReplicas = 8, // on_failure = shrink: the survivors cannot go on; a checkpoint is written, requeue to resume
  // 9 is the launch scripts' (the MPI runtime ended the job before mirrored finished).
  kWriteFailed = 10,   // an output file could not be written (a full disk, a quota): the file it would replace is unchanged
  kResizeRequested = 11,  // a shrunk job asked to grow back: a checkpoint is written; relaunch at full size to resume
  kInterrupted = 130,  // Ctrl-C (SIGINT): stopped after writing a checkpoint; run the same command again to resume
};

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& message, bool uniform = false)
      : std::runtime_error(message), code_(code), uniform_(uniform) {}
  ExitCode code() const { return code_; }
  bool uniform() const { return uniform_; }

 private:
  ExitCode code_;
  bool uniform_;
};

// An error in user input that every rank detects identically (config, data files).
class InputError : public Error {
 public:
  explicit InputError(const std::string& message, ExitCode code = ExitCode::kBadInput)
      : Error(code, message, /*uniform=*/true) {}
};

// Builds "file:line: what failed" for internal failures. The rank and host are added once,
// where the message is printed (rank_error, rank_warning in core/log.h).
std::string where(const char* file, int line, const std::string& what);

}  // namespace mirrored

// Internal invariant: throws mirrored::Error(kFailure) with file:line and the condition.
#define MIRRORED_CHECK(cond, ...)                                                       \
  do {                                                                                  \
    if (!(cond))                                                                        \
      throw ::mirrored::Error(::mirrored::ExitCode::kFailure,                           \
                              ::mirrored::where(__FILE__, __LINE__,                     \
                                                ::mirrored::str_cat("check failed: " #cond \
                                                                    " ", __VA_ARGS__))); \
  } while (0)
