#include "mirrored/core/run_state.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "mirrored/core/file_replacement.h"
#include "mirrored/core/log.h"
#include "mirrored/core/strings.h"

namespace mirrored {
namespace {

// A signals file longer than this is not a launch script's (a few lines per job).
constexpr uint64_t kMaxRequestBytes = 64 * 1024;

struct AllowedSignal {
  const char* name;
  int number;
};
// What a launch script relays: its own signals (a preemption warning, whose configurable
// signal is one of USR1, USR2 and TERM; an interrupted script; a closed terminal).
constexpr AllowedSignal kAllowed[] = {
    {"TERM", SIGTERM}, {"INT", SIGINT}, {"HUP", SIGHUP}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2}};

std::string quoted_dir() { return str_cat(kRunStateVariable, " '", run_state_dir_path(), "'"); }

int open_checked_dir() {
  const std::string path = run_state_dir_path();
  if (path.empty()) return -1;
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    rank_warning(str_cat(quoted_dir(), ": ",
                         error == ELOOP || error == ENOTDIR ? "a symlink or not a directory" : std::strerror(error),
                         ": not used (the launch script will not see this rank's exit status)"));
    return -1;
  }
  const std::string problem = run_state_dir_problem(fd);
  if (!problem.empty()) {
    rank_warning(str_cat(quoted_dir(), ": ", problem, ": not used (the launch script will not see this rank's exit "
                                                      "status)"));
    ::close(fd);
    return -1;
  }
  return fd;
}

// The file's bytes from `offset`, at most `limit` of them.
std::string read_from(int fd, uint64_t offset, uint64_t limit) {
  std::string bytes(static_cast<size_t>(limit), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t got = pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    done += static_cast<size_t>(got);
  }
  bytes.resize(done);
  return bytes;
}

}  // namespace

std::string run_state_dir_path() {
  const char* path = std::getenv(kRunStateVariable);
  return path != nullptr ? path : "";
}

int run_state_dir() {
  static const int fd = open_checked_dir();
  return fd;
}

std::string run_state_dir_problem(int dir_fd) {
  struct stat info {};
  if (fstat(dir_fd, &info) != 0) return str_cat("cannot check it: ", std::strerror(errno));
  if (!S_ISDIR(info.st_mode)) return "not a directory";
  if (info.st_uid != geteuid())
    return str_cat("owned by uid ", info.st_uid, ", not by this user (uid ", geteuid(), ")");
  if ((info.st_mode & 07777) != 0700) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(info.st_mode & 07777));
    return str_cat("mode ", mode, ", expected 0700 (only this user may create, replace or read its files)");
  }
  return "";
}

bool write_run_state_file(const char* name, std::string_view contents) {
  const int dir = run_state_dir();
  if (dir < 0) return false;
  // Through the descriptor: the directory checked at open, whatever its path names now.
  try {
    replace_file(str_cat("/proc/self/fd/", dir, "/", name), contents, 0600);
    return true;
  } catch (const std::exception& e) {
    rank_warning(str_cat(quoted_dir(), ": ", name, ": ", e.what()));
    return false;
  }
}

int open_run_state_file_for_append(const char* name) {
  const int dir = run_state_dir();
  if (dir < 0) return -1;
  const int fd = openat(dir, name, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) rank_warning(str_cat(quoted_dir(), ": cannot open ", name, ": ", std::strerror(errno)));
  return fd;
}

std::vector<RelayedRequest> parse_relayed_requests(std::string_view text, size_t& consumed) {
  std::vector<RelayedRequest> requests;
  consumed = 0;
  for (size_t end; (end = text.find('\n', consumed)) != std::string_view::npos; consumed = end + 1) {
    const std::string line = trim(text.substr(consumed, end - consumed));
    if (line.empty()) continue;
    RelayedRequest request;
    request.text = line;
    const std::string_view name = std::string_view(line).substr(line.rfind("SIG", 0) == 0 ? 3 : 0);
    if (line == "abort") request.kind = RelayedRequest::Kind::kAbort;
    for (const AllowedSignal& allowed : kAllowed)
      if (name == allowed.name) {
        request.kind = RelayedRequest::Kind::kSignal;
        request.signal = allowed.number;
      }
    requests.push_back(std::move(request));
  }
  return requests;
}

namespace {

// A host name as a hostfile names it: letters, digits, '.', '-', '_' (no spaces, no
// shell or terminal characters), 1 to 253 of them.
bool plausible_host(std::string_view host) {
  if (host.empty() || host.size() > 253) return false;
  return std::all_of(host.begin(), host.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
           c == '_';
  });
}

bool acceptable_trigger(std::string_view line) {
  if (line == "command" || line == "signal") return true;
  constexpr std::string_view kHost = "host-returned ";
  return line.substr(0, kHost.size()) == kHost && plausible_host(line.substr(kHost.size()));
}

// The reason a file opened for requests is not to be trusted, or "".
std::string untrusted_file_problem(int fd) {
  struct stat info {};
  if (fstat(fd, &info) != 0) return str_cat("cannot check it: ", std::strerror(errno));
  if (!S_ISREG(info.st_mode)) return "not a plain file";
  if (info.st_uid != geteuid()) return str_cat("owned by uid ", info.st_uid, ", not by this user (uid ", geteuid(), ")");
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(info.st_mode & 07777));
    return str_cat("mode ", mode, ": others may write it");
  }
  return "";
}

}  // namespace

std::vector<ResizeRequest> parse_resize_requests(std::string_view text) {
  std::vector<ResizeRequest> requests;
  size_t start = 0;
  for (size_t end; (end = text.find('\n', start)) != std::string_view::npos; start = end + 1) {
    const std::string line = trim(text.substr(start, end - start));
    if (line.empty()) continue;
    ResizeRequest request;
    request.text = line;
    request.accepted = acceptable_trigger(line);
    if (request.accepted) request.trigger = line;
    requests.push_back(std::move(request));
  }
  return requests;
}

std::string append_resize_request(const std::string& state_dir, std::string_view trigger) {
  if (!acceptable_trigger(trigger)) return str_cat("'", trigger, "' is not a resize trigger");
  const std::string where = str_cat("run-state directory '", state_dir, "'");
  const int dir = ::open(state_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) {
    const int error = errno;
    return str_cat(where, ": ", error == ELOOP || error == ENOTDIR ? "a symlink or not a directory" : std::strerror(error));
  }
  std::string problem = run_state_dir_problem(dir);
  if (!problem.empty()) {
    ::close(dir);
    return str_cat(where, ": ", problem);
  }
  const int fd = openat(dir, kResizeRequestFile, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
  ::close(dir);
  if (fd < 0) {
    const int error = errno;
    return str_cat(where, ": ", kResizeRequestFile, ": ", error == ELOOP ? "a symlink" : std::strerror(error));
  }
  problem = untrusted_file_problem(fd);
  const std::string line = str_cat(trigger, "\n");
  if (problem.empty() && ::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
    problem = str_cat("cannot write it: ", std::strerror(errno));
  ::close(fd);
  return problem.empty() ? "" : str_cat(where, ": ", kResizeRequestFile, ": ", problem);
}

std::string RunStateReader::read_new_lines() {
  const int dir = run_state_dir();
  if (dir < 0) return "";
  const int fd = openat(dir, name_, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return "";
  struct stat info {};
  std::string lines;
  const bool trusted = fstat(fd, &info) == 0 && S_ISREG(info.st_mode) && info.st_uid == geteuid() &&
                       (info.st_mode & (S_IWGRP | S_IWOTH)) == 0;
  if (!trusted) {
    if (!warned_)
      rank_warning(str_cat(quoted_dir(), ": ", name_, " is not a plain file of this user that only it may write: "
                                                      "ignored"));
    warned_ = true;
  } else {
    // A new file (another inode, or one shorter than what was read): read it from its start.
    if (info.st_dev != device_ || info.st_ino != inode_ || static_cast<uint64_t>(info.st_size) < offset_) {
      device_ = info.st_dev;
      inode_ = info.st_ino;
      offset_ = 0;
    }
    const uint64_t size = static_cast<uint64_t>(info.st_size);
    if (size > offset_) {
      lines = read_from(fd, offset_, std::min(size - offset_, kMaxRequestBytes));
      // Whole lines only: a line still being written is read with the rest next time.
      lines.resize(lines.rfind('\n') == std::string::npos ? 0 : lines.rfind('\n') + 1);
      offset_ += lines.size();
      if (lines.empty() && size - offset_ >= kMaxRequestBytes) {
        if (!warned_) rank_warning(str_cat(quoted_dir(), ": ", name_, " holds a line longer than ", kMaxRequestBytes,
                                           " bytes: ignored"));
        warned_ = true;
        offset_ = size;
      }
    }
  }
  ::close(fd);
  return lines;
}

}  // namespace mirrored
