#include "mirrored/core/library_error.h"

#include "mirrored/core/error.h"
#include "mirrored/core/log.h"

namespace mirrored {

void throw_library_error(const char* file, int line, const char* call, const std::string& message) {
  throw Error(ExitCode::kFailure, where(file, line, str_cat(call, ": ", message)));
}

void log_library_error(const char* file, int line, const char* call, const std::string& message) noexcept {
  try {
    rank_error(where(file, line, str_cat(call, ": ", message)));
  } catch (...) {
    // Logging from a destructor must never throw; a lost line is the lesser harm.
  }
}

}  // namespace mirrored
