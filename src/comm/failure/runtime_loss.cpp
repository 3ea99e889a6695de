#include "mirrored/comm/failure/runtime_loss.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "mirrored/core/log.h"
#include "mirrored/core/process.h"
#include "mirrored/core/run_state.h"
#include "mirrored/core/strings.h"

namespace mirrored::comm {
namespace {

// PMIx's event interface, declared here as pmix.h does (PMIx 4 and 5 agree): Open MPI's
// wheel ships libpmix inside it but no PMIx headers, and these are the only calls needed.
// They are looked up in the running process, which has libpmix when Open MPI 5 does.
constexpr int kPmixSuccess = 0;
constexpr int kPmixErrLostConnection = -61;      // PMIX_ERR_LOST_CONNECTION
constexpr int kPmixEventActionComplete = -334;   // PMIX_EVENT_ACTION_COMPLETE: the chain stops here
using EventDone = void (*)(int status, void* results, size_t nresults, void* op_done, void* op_data, void* event_data);
using EventHandler = void (*)(size_t id, int status, const void* source, void* info, size_t ninfo, void* results,
                              size_t nresults, EventDone done, void* event_data);
using RegisterEventHandler = int (*)(int* codes, size_t ncodes, void* info, size_t ninfo, EventHandler handler,
                                     void* registered, void* registered_data);

using Clock = std::chrono::steady_clock;

// The pipe to the agent ("h": keep the runtime's signals from me, "r": pass them on again).
int agent_fd() {
  static const int fd = [] {
    const char* fd_text = std::getenv("MIRRORED_RANK_AGENT_FD");
    const char* pid_text = std::getenv("MIRRORED_RANK_AGENT_PID");
    if (!fd_text || !pid_text || std::atoll(pid_text) != static_cast<long long>(getppid())) return -1;
    return std::atoi(fd_text);
  }();
  return fd;
}

std::mutex window_mutex;
std::atomic<bool> window_open{false};
std::atomic<bool> gone{false};
Clock::time_point window_closes;
Clock::time_point next_touch;

void tell_agent(char what) {
  if (agent_fd() >= 0 && write(agent_fd(), &what, 1) != 1)
    rank_warning(str_cat("cannot reach the rank agent (MIRRORED_RANK_AGENT_FD ", agent_fd(), ")"));
}

// stdout and stderr end at the daemon. While the window is open every line of output is
// also appended to the run-state directory's `output` (O_APPEND: lines of several ranks stay
// whole; created 0600, never through a symlink: core/run_state.h), which the launch script
// shows once mpirun has exited: so the lines printed between the loss and the runtime's end,
// which the dying daemon no longer passed on, are there too.
int output_copy = -1;

void start_output_copy() {
  if (output_copy >= 0) return;
  output_copy = open_run_state_file_for_append("output");
  copy_output_to(output_copy);
}

void stop_output_copy() {
  copy_output_to(-1);
  if (output_copy >= 0) close(output_copy);
  output_copy = -1;
}

// Without the runtime only the copy is read: the pipes to the daemon go nowhere.
void silence_standard_output() {
  std::fflush(nullptr);
  const int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null < 0) return;
  dup2(null, STDOUT_FILENO);
  dup2(null, STDERR_FILENO);
  close(null);
}

// Requests for ranks that no launcher can reach any more: the launch script appends the
// names of the signals it gets, one per line, to the run-state directory's `signals`
// (launch/mpi_env.sh, mirrored_relay_signal), and a rank that ends the job writes "abort"
// there (relay_abort_to_survivors). Read from the start: one sent while the runtime was
// ending (a TERM from an interrupted script) may have reached the agent, which kept it from
// this rank. Only a file of this user that no one else may write is read, and only the
// allow-list of core/run_state.h is acted on.
RunStateReader relayed_requests("signals");

void raise_relayed_signals() {
  const std::string lines = relayed_requests.read_new_lines();
  if (lines.empty()) return;
  size_t consumed = 0;
  for (const RelayedRequest& request : parse_relayed_requests(lines, consumed)) {
    switch (request.kind) {
      case RelayedRequest::Kind::kSignal:
        rank_warning(str_cat("SIG", request.text.rfind("SIG", 0) == 0 ? request.text.substr(3) : request.text,
                             " relayed by the launch script (the MPI runtime is gone)"));
        kill(getpid(), request.signal);
        break;
      case RelayedRequest::Kind::kAbort:
        // Another rank ended the job while the runtime was gone; it would have ended this one.
        rank_warning("a rank of this job ended it while the MPI runtime was gone: ending as the runtime would have");
        kill(getpid(), SIGKILL);
        break;
      case RelayedRequest::Kind::kRefused:
        rank_warning(str_cat("the run-state directory's signals file asks for '", request.text,
                             "': refused (expected one of TERM, INT, HUP, USR1, USR2 or abort)"));
        break;
    }
  }
}

void on_lost_connection(size_t, int, const void*, void*, size_t, void*, size_t, EventDone done, void* event_data) {
  if (!outlives_runtime()) {
    // Not a loss this rank survives: Open MPI's own handler ends it, as without the agent.
    if (done) done(kPmixSuccess, nullptr, 0, nullptr, nullptr, event_data);
    return;
  }
  gone = true;
  rank_warning("the MPI runtime ended the job after it lost a node's daemon; this rank goes on without it "
               "with the other survivors (mpirun has exited: the launch script waits for the chief's status)");
  silence_standard_output();
  if (done) done(kPmixEventActionComplete, nullptr, 0, nullptr, nullptr, event_data);
}

}  // namespace

bool launched_by_rank_agent() { return agent_fd() >= 0; }

void watch_runtime_connection() {
  if (!launched_by_rank_agent()) return;
  auto register_handler = reinterpret_cast<RegisterEventHandler>(dlsym(RTLD_DEFAULT, "PMIx_Register_event_handler"));
  if (!register_handler) {
    rank_warning("no PMIx in this process: a lost node's daemon will end the job (on_failure = shrink survives "
                 "lost ranks, not the end of the MPI runtime)");
    return;
  }
  int code = kPmixErrLostConnection;
  const int id = register_handler(&code, 1, nullptr, 0, &on_lost_connection, nullptr, nullptr);
  if (id < 0)
    rank_warning(str_cat("PMIx_Register_event_handler failed (", id, "): a lost node's daemon will end the job"));
}

void outlive_runtime_after_loss() {
  if (!launched_by_rank_agent()) return;
  // Its own thread, for the rest of the process: a rank left alone has no watchdog.
  static std::once_flag tender;
  std::call_once(tender, [] {
    std::thread([] {
      for (;;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        tend_runtime_loss();
      }
    }).detach();
  });
  std::lock_guard<std::mutex> lock(window_mutex);
  window_closes = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(kOutliveWindowSeconds));
  if (!window_open.exchange(true)) {
    start_output_copy();
    tell_agent('h');
  }
}

void relay_abort_to_survivors() {
  if (!outlives_runtime()) return;
  const int fd = open_run_state_file_for_append("signals");
  if (fd < 0) return;
  if (write(fd, "abort\n", 6) < 0) {
    // Best effort, on the way out: the survivors would go on without this rank.
  }
  close(fd);
}

bool outlives_runtime() { return gone.load() || window_open.load(); }

bool runtime_gone() { return gone.load(); }

bool abandoned_by_launcher(int64_t launcher_pid) {
  return launcher_pid != 0 && static_cast<int64_t>(getppid()) != launcher_pid && !outlives_runtime();
}

void tend_runtime_loss() {
  if (!launched_by_rank_agent()) return;
  const auto now = Clock::now();
  {
    std::lock_guard<std::mutex> lock(window_mutex);
    if (window_open && !gone && now >= window_closes) {
      window_open = false;
      stop_output_copy();
      tell_agent('r');
    }
  }
  if (!gone) return;
  {
    std::lock_guard<std::mutex> lock(window_mutex);
    raise_relayed_signals();
  }
  if (now < next_touch) return;
  next_touch = now + std::chrono::seconds(1);
  // The heartbeat the launch script waits on: the modification time of `alive`.
  static const int alive = open_run_state_file_for_append("alive");
  if (alive >= 0) futimens(alive, nullptr);
}

}  // namespace mirrored::comm
