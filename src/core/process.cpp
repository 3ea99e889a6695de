#include "mirrored/core/process.h"

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

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

std::string exit_status_file() {
  const char* path = std::getenv("MIRRORED_EXIT_STATUS_FILE");
  return path ? path : "";
}

void report_exit_status(int status) {
  const std::string path = exit_status_file();
  if (path.empty() || process_identity().rank != 0) return;
  // Plain stdio, no exceptions: this runs on the way out, also from an error path.
  std::FILE* file = std::fopen(path.c_str(), "w");
  bool written = file != nullptr && std::fprintf(file, "%d\n", status) > 0;
  if (file != nullptr) written = (std::fclose(file) == 0) && written;
  if (!written)
    std::fprintf(stderr, "mirrored: cannot write the exit status to MIRRORED_EXIT_STATUS_FILE '%s': %s\n", path.c_str(),
                 std::strerror(errno));
}

}  // namespace mirrored
