#pragma once
// The run-state directory: the files through which a launch script and the ranks it started
// steer each other (launch/mpi_env.sh makes it and names it in MIRRORED_RUN_STATE_DIR):
//   exit-status      the chief's exit status (report_exit_status in core/process.h)
//   alive            touched every second by ranks that outlive the MPI runtime
//   output           their output from a loss on (comm/failure/runtime_loss.h)
//   signals          what the script relays to them: one request a line (parse_relayed_requests)
//   launcher-ended   the script's own marker (it ended a lingering launcher)
//   resize           requests that a shrunk job grow back to its configured size, one a line
//                    (`mirrored resize`, or the launch script: parse_resize_requests)
//   lost-hosts       the hosts a shrink left without a rank, one a line (written by the
//                    chief; multinode.sh checks whether they answer again)
// These files steer a job, and the directory usually sits in a working directory others can
// write (a cluster's shared file system), so they are data from strangers unless proven
// otherwise (as OpenSSH treats its keys, systemd its runtime directories):
//   - the directory is used only when it is a directory (not a symlink), owned by this user
//     and of mode 0700: nobody else can create, replace or read a file in it;
//   - it is opened once and every file is reached through that descriptor (openat), so a
//     directory renamed away and another put in its place afterwards is never used;
//   - files are opened with O_NOFOLLOW, created with mode 0600 (O_EXCL where one writer
//     creates them), and a file read for requests must be a plain file of this user that no
//     one else may write;
//   - requests come from an allow-list (TERM, INT, HUP, USR1, USR2, and "abort": a rank of
//     this job ended it); anything else is refused with a warning.
// A directory that fails a check is not used at all (one warning): the launch script then
// sees no status and says so, which is the safe failure.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mirrored {

inline constexpr const char* kRunStateVariable = "MIRRORED_RUN_STATE_DIR";

// MIRRORED_RUN_STATE_DIR, or "" when it is not set.
std::string run_state_dir_path();

// The directory's descriptor, opened and checked once per process (see above); -1 when
// the variable is unset or the directory was refused.
int run_state_dir();

// The reason the directory would be refused, or "" when it passes (for a descriptor of an
// open directory). Exposed for the tests.
std::string run_state_dir_problem(int dir_fd);

// `contents` as the whole of run-state file `name`, replaced at once (a temporary in the
// directory renamed over it). False, with a warning, when it cannot be written.
bool write_run_state_file(const char* name, std::string_view contents);

// Opens run-state file `name` for appending (created 0600 if missing, never through a
// symlink): a descriptor, or -1 with a warning.
int open_run_state_file_for_append(const char* name);

// One line of the signals file, as read.
struct RelayedRequest {
  enum class Kind { kSignal, kAbort, kRefused } kind = Kind::kRefused;
  int signal = 0;      // kSignal: the signal to raise
  std::string text;    // the line as written (for messages)
};

// The complete lines of `text` (a partial last line is left for the next read) as
// requests: a signal name (TERM, INT, HUP, USR1, USR2, with or without "SIG") raises it,
// "abort" ends the rank as the MPI runtime would have; a number or any other word is
// refused. `consumed` gets the bytes of the complete lines.
std::vector<RelayedRequest> parse_relayed_requests(std::string_view text, size_t& consumed);

// Reads what was appended to run-state file `name` since the last call for the same file
// (from its start when the file was replaced): the new complete lines. "" when the file
// is missing, or refused (not a plain file of this user, or writable by others: a warning,
// once per file).
class RunStateReader {
 public:
  explicit RunStateReader(const char* name) : name_(name) {}
  std::string read_new_lines();

 private:
  const char* name_;
  uint64_t device_ = 0, inode_ = 0;
  uint64_t offset_ = 0;
  bool warned_ = false;
};

// The resize request file: what asks a shrunk job to save its state and exit
// ExitCode::kResizeRequested, so that the launch script relaunches it at full size.
inline constexpr const char* kResizeRequestFile = "resize";
// The hosts a shrink left without a rank (the chief's; the launch script reads it).
inline constexpr const char* kLostHostsFile = "lost-hosts";

// One line of the resize file. The allow-list: "command" (mirrored resize), "signal" (the
// launch script got SIGURG), "host-returned HOST" (the launch script saw a lost host answer
// again; HOST: letters, digits, '.', '-' and '_', at most 253 of them). Anything else is
// refused.
struct ResizeRequest {
  bool accepted = false;
  std::string trigger;  // accepted: the line as a trigger name ("command", "host-returned node-b")
  std::string text;     // the line as written (for messages)
};

// The complete lines of `text` (as RunStateReader::read_new_lines returns them) as requests.
std::vector<ResizeRequest> parse_resize_requests(std::string_view text);

// Appends `trigger` (one of the allow-list above) as a line to the resize file of the
// run-state directory at `state_dir`, which must pass the checks above (a directory, not a
// symlink, of this user, mode 0700); the file is created 0600, never through a symlink, and
// must be a plain file of this user that no one else may write. "" when written, else why
// not (naming the directory or the file).
std::string append_resize_request(const std::string& state_dir, std::string_view trigger);

}  // namespace mirrored
