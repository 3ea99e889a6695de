#include "h5_check.h"

namespace mirrored::io::detail {

void silence_hdf5_errors() {
  static const bool silenced = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)silenced;
}

std::string hdf5_error_reason() {
  std::string reason;
  // Walking upward visits the innermost (most specific) entry first; keep only that one.
  auto visit = [](unsigned position, const H5E_error2_t* entry, void* out) -> herr_t {
    if (position == 0 && entry->desc != nullptr) *static_cast<std::string*>(out) = entry->desc;
    return 0;
  };
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, visit, &reason);
  return reason;
}

void throw_hdf5_failure(const char* file, int line, const char* call, const std::string& target) {
  std::string message = str_cat(call, " on ", target, " failed");
  const std::string reason = hdf5_error_reason();
  if (!reason.empty()) message += str_cat(": ", reason);
  H5Eclear2(H5E_DEFAULT);
  throw Error(ExitCode::kFailure, where(file, line, message));
}

}  // namespace mirrored::io::detail
