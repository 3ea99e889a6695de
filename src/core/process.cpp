#include "mirrored/core/process.h"

#include <unistd.h>

#include <climits>

#include "mirrored/core/run_state.h"
#include "mirrored/core/strings.h"

namespace mirrored {
namespace {
ProcessIdentity& identity_storage() {
  static ProcessIdentity identity{0, 1, local_hostname()};
  return identity;
}
}  // namespace

const ProcessIdentity& process_identity() { return identity_storage(); }

void set_process_identity(ProcessIdentity identity) { identity_storage() = std::move(identity); }

std::string local_hostname() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return name;
}

std::string describe_process() {
  const auto& id = process_identity();
  return str_cat("rank ", id.rank, "/", id.world_size, " on ", id.host);
}

void report_exit_status(int status) {
  if (process_identity().rank != 0) return;
  write_run_state_file("exit-status", str_cat(status, "\n"));  // warns itself when it cannot
}

}  // namespace mirrored
