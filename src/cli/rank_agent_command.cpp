// mirrored rank-agent PROGRAM [ARGS...]: the process Open MPI's daemon starts in a rank's
// place when a job runs with on_failure = shrink (the launch scripts pass it as the daemon's
// exec agent, `--prtemca odls_base_exec_agent "<mirrored> rank-agent"`). It starts the rank
// in a session of its own and stands in for it towards the daemon.
//
// Why: Open MPI 5.0's runtime (PRRTE 3.0) ends the whole job as soon as it loses a node's
// daemon, whatever the job asked for: every daemon signals the processes it started
// (SIGCONT, SIGTERM, SIGKILL, 250 ms apart) and exits. A rank in its own session is out of
// reach of those signals; the daemon signals this agent instead, which
//   - passes on every signal to the rank (so a job ended on purpose, by an MPI_Abort, an
//     interrupted mpirun or a time limit, ends as before; SIGTERM, SIGINT and SIGHUP after
//     150 ms, time for a rank whose shrink is under way to say what follows), except
//   - SIGTERM, SIGINT and SIGHUP while the rank says it outlives the runtime: it writes "h"
//     to MIRRORED_RANK_AGENT_FD after its job lost ranks and shrank past them, and "r" when
//     that window closed with the runtime still there (comm/failure/runtime_loss.h); survivors whose
//     runtime ended in the window go on without it.
// When the agent ends before the rank (SIGKILL), the rank, which watches its parent, exits
// unless it outlives the runtime. The agent ends as the rank did (status or signal).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "commands.h"

namespace mirrored::cli {
namespace {

constexpr std::array kPassedOn = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGALRM, SIGCONT, SIGQUIT};

bool ends_the_rank(int signal) { return signal == SIGTERM || signal == SIGINT || signal == SIGHUP; }
// Open MPI's daemons send SIGKILL 250 ms after SIGTERM; what is held back is passed on before.
constexpr int kHoldBackMs = 150;

// Ends the agent as the rank ended: the same exit status, or the same signal (the daemon
// tells a killed rank, which a job that survives failures goes on without, from one that
// exited with an error, which ends the job).
[[noreturn]] void end_like(int wait_status) {
  if (WIFSIGNALED(wait_status)) {
    const int signal = WTERMSIG(wait_status);
    ::signal(signal, SIG_DFL);
    sigset_t just_this;
    sigemptyset(&just_this);
    sigaddset(&just_this, signal);
    sigprocmask(SIG_UNBLOCK, &just_this, nullptr);
    kill(getpid(), signal);
  }
  _exit(WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 1);
}

[[noreturn]] void start_rank(char** argv, const sigset_t& original_mask, int hold_fd) {
  // A session of its own: out of the process group the daemon signals.
  setsid();
  sigprocmask(SIG_SETMASK, &original_mask, nullptr);
  setenv("MIRRORED_RANK_AGENT_FD", std::to_string(hold_fd).c_str(), 1);
  setenv("MIRRORED_RANK_AGENT_PID", std::to_string(getppid()).c_str(), 1);
  execvp(argv[0], argv);
  std::fprintf(stderr, "mirrored rank-agent: cannot start '%s': %s\n", argv[0], std::strerror(errno));
  _exit(127);
}

}  // namespace

int rank_agent_command(int argc, char** argv) {
  if (argc < 1) {
    std::fputs("usage: mirrored rank-agent PROGRAM [ARGS...]\n", stderr);
    return 2;
  }
  // Blocked before the fork, so none is lost between it and the loop below.
  sigset_t watched, original;
  sigemptyset(&watched);
  for (int signal : kPassedOn) sigaddset(&watched, signal);
  sigaddset(&watched, SIGCHLD);
  if (sigprocmask(SIG_BLOCK, &watched, &original) != 0) {
    std::fprintf(stderr, "mirrored rank-agent: sigprocmask: %s\n", std::strerror(errno));
    return 1;
  }
  // Before the fork: without it the agent could neither pass signals on nor see the rank
  // end (SIGCHLD stays blocked), so it must not start a rank it cannot mind.
  const int signals = signalfd(-1, &watched, SFD_CLOEXEC);
  if (signals < 0) {
    std::fprintf(stderr, "mirrored rank-agent: signalfd: %s (the rank is not started)\n", std::strerror(errno));
    return 1;
  }
  std::array<int, 2> hold{};
  if (pipe(hold.data()) != 0) {
    std::fprintf(stderr, "mirrored rank-agent: pipe: %s\n", std::strerror(errno));
    return 1;
  }
  fcntl(hold[0], F_SETFD, FD_CLOEXEC);
  const pid_t rank = fork();
  if (rank < 0) {
    std::fprintf(stderr, "mirrored rank-agent: fork: %s\n", std::strerror(errno));
    return 1;
  }
  if (rank == 0) {
    close(hold[0]);
    start_rank(argv, original, hold[1]);
  }
  close(hold[1]);
  bool outlives_runtime = false;
  // An ending signal is held back for kHoldBackMs before it is passed on, for the rank to say
  // it outlives the runtime: the runtime signals every rank as soon as it loses a daemon,
  // while the rank's shrink past the lost node may be still under way.
  int pending = 0;
  auto deadline = std::chrono::steady_clock::now();
  std::array<pollfd, 2> watch = {pollfd{signals, POLLIN, 0}, pollfd{hold[0], POLLIN, 0}};
  for (;;) {
    int timeout_ms = -1;
    if (pending != 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      timeout_ms = static_cast<int>(std::max<int64_t>(0, left.count()));
    }
    const int ready = poll(watch.data(), watch.size(), timeout_ms);
    if (ready < 0) continue;  // EINTR
    if (ready > 0 && watch[1].revents != 0) {
      char byte = 0;
      if (read(hold[0], &byte, 1) == 1) outlives_runtime = byte == 'h';
      else watch[1].fd = -1;  // the rank closed it, or exited
    }
    if (pending != 0 && (outlives_runtime || std::chrono::steady_clock::now() >= deadline)) {
      if (!outlives_runtime) kill(rank, pending);
      pending = 0;
    }
    if (ready <= 0 || watch[0].revents == 0) continue;
    signalfd_siginfo info{};
    if (read(signals, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) continue;
    const int signal = static_cast<int>(info.ssi_signo);
    if (signal == SIGCHLD) {
      int status = 0;
      if (waitpid(rank, &status, WNOHANG) == rank) end_like(status);
      continue;
    }
    if (ends_the_rank(signal)) {
      if (outlives_runtime || pending != 0) continue;
      pending = signal;
      deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kHoldBackMs);
      continue;
    }
    kill(rank, signal);
  }
}

}  // namespace mirrored::cli
