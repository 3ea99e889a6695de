#include "mirrored/train/preemption.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>

#include "mirrored/checkpoint/run_directory.h"
#include "mirrored/comm/health/flight_recorder.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/train/checkpointer.h"

namespace mirrored::train {
namespace {
// What a rank has seen, as the all-reduce (max) combines it: a preemption warning outranks
// Ctrl-C (the job is requeued either way only after a preemption), and both outrank a
// request to grow back (a stop the user or the scheduler asked for is not turned into a
// relaunch).
constexpr int32_t kNothing = 0, kResize = 1, kInterrupt = 2, kPreemption = 3;

// Written from signal handlers: lock-free, so async-signal-safe.
std::atomic<int32_t> g_signalled{kNothing};
std::atomic<int> g_interrupts{0};
std::atomic<int> g_preemption_signal{0};
static_assert(std::atomic<int32_t>::is_always_lock_free && std::atomic<int>::is_always_lock_free);
std::atomic<bool> g_installed{false};

// The lines the handlers write (the chief's; empty elsewhere). Set before training starts,
// never changed while a handler may read them.
std::string g_first_interrupt, g_second_interrupt, g_terminated;
// What asked for a resize (request_resize; the chief's, main thread only).
std::string g_resize_trigger;

void say(const std::string& line) {
  if (!line.empty() && write(STDERR_FILENO, line.data(), line.size()) < 0) {
    // Nothing to do about a closed stderr in a signal handler.
  }
}

// Ends the process as the signal's default action would.
void end_by(int signal) {
  std::signal(signal, SIG_DFL);
  raise(signal);  // delivered once this handler returns (the signal is blocked until then)
}

// Raises the flag to `level` unless it is at least that already.
void raise_to(int32_t level) {
  int32_t seen = g_signalled.load(std::memory_order_relaxed);
  while (seen < level && !g_signalled.compare_exchange_weak(seen, level, std::memory_order_relaxed)) {
  }
}

extern "C" void on_stop_signal(int signal) {
  if (signal == g_preemption_signal.load(std::memory_order_relaxed)) {
    g_signalled.store(kPreemption, std::memory_order_relaxed);
  } else if (signal == SIGINT) {
    if (g_interrupts.fetch_add(1, std::memory_order_relaxed) == 0) {
      raise_to(kInterrupt);
      say(g_first_interrupt);
    } else {
      say(g_second_interrupt);
      end_by(SIGINT);
    }
  } else if (signal == SIGTERM) {
    say(g_terminated);
    end_by(SIGTERM);
  }
}

int signal_number(config::PreemptionSignal signal) {
  switch (signal) {
    case config::PreemptionSignal::kUsr1: return SIGUSR1;
    case config::PreemptionSignal::kUsr2: return SIGUSR2;
    case config::PreemptionSignal::kTerm: return SIGTERM;
    case config::PreemptionSignal::kNone: break;
  }
  return 0;
}

// As config.ini names it (preemption_signal = USR1) and as it follows "SIG".
const char* signal_name(config::PreemptionSignal signal) {
  switch (signal) {
    case config::PreemptionSignal::kUsr1: return "USR1";
    case config::PreemptionSignal::kUsr2: return "USR2";
    case config::PreemptionSignal::kTerm: return "TERM";
    case config::PreemptionSignal::kNone: break;
  }
  return "none";
}

// The resize stop's record and line (chief only): the step it stopped after, its world and
// what asked, with the wall time of the step's end, from which the relaunched run counts its
// downtime (elastic/grow_back.h), in milliseconds since the epoch (a double in metrics.jsonl
// keeps 9 digits: whole seconds only).
void report_resize(TrainContext& ctx, int64_t step, int64_t step_end_ms) {
  ctx.run_dir.log_metrics({{"kind", std::string("resize")},
                           {"step", step},
                           {"world_size", static_cast<int64_t>(ctx.strategy.num_replicas_in_sync())},
                           {"trigger", g_resize_trigger},
                           {"time_ms", step_end_ms}});
  chief_print(str_cat("resize requested (", g_resize_trigger, "): checkpoint of step ", step, " written to ",
                      checkpoint::checkpoint_dir(ctx.config), "; exiting with status ",
                      static_cast<int>(ExitCode::kResizeRequested),
                      " so the launch script relaunches the job at its full size and resumes from it"));
}

int64_t wall_milliseconds() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void request_resize(const std::string& trigger) {
  if (g_signalled.load(std::memory_order_relaxed) != kNothing) return;
  g_resize_trigger = trigger;
  raise_to(kResize);
}

struct PreemptionHandler::Saved {
  struct sigaction preemption, interrupt, terminate;
};

PreemptionHandler::PreemptionHandler(config::PreemptionSignal signal)
    : signal_(signal_number(signal)), name_(signal_name(signal)) {
  MIRRORED_CHECK(!g_installed.exchange(true), "only one PreemptionHandler may exist at a time");
  g_signalled.store(kNothing);
  g_resize_trigger.clear();
  g_interrupts.store(0);
  g_preemption_signal.store(signal_);
  g_first_interrupt.clear();
  g_second_interrupt.clear();
  g_terminated.clear();
  saved_ = new Saved{};
  struct sigaction action {};
  action.sa_handler = &on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // blocking calls (MPI, file I/O) carry on; the flag is read between steps
  const auto install = [&](int number, struct sigaction* previous) {
    if (sigaction(number, &action, previous) != 0) {
      delete saved_;
      g_installed = false;
      throw Error(ExitCode::kFailure, str_cat("cannot install a handler for signal ", number));
    }
  };
  if (signal_ != 0) install(signal_, &saved_->preemption);
  install(SIGINT, &saved_->interrupt);
  if (signal_ != SIGTERM) install(SIGTERM, &saved_->terminate);
}

PreemptionHandler::~PreemptionHandler() {
  if (signal_ != 0) {
    // A warning that arrives after the last step has nothing left to save, and the default
    // action would kill a finished run on its way out (and fail the job): ignore it then.
    if (saved_->preemption.sa_handler == SIG_DFL && !(saved_->preemption.sa_flags & SA_SIGINFO)) {
      struct sigaction ignore {};
      ignore.sa_handler = SIG_IGN;
      sigemptyset(&ignore.sa_mask);
      sigaction(signal_, &ignore, nullptr);
    } else {
      sigaction(signal_, &saved_->preemption, nullptr);
    }
  }
  sigaction(SIGINT, &saved_->interrupt, nullptr);
  if (signal_ != SIGTERM) sigaction(SIGTERM, &saved_->terminate, nullptr);
  delete saved_;
  g_preemption_signal.store(0);
  g_installed = false;
}

void PreemptionHandler::on_train_begin(TrainContext& ctx) {
  if (!ctx.strategy.is_chief()) return;
  const std::string dir = checkpoint::checkpoint_dir(ctx.config);
  // Written by the handlers with write(2): whole lines, each starting on a fresh one.
  g_first_interrupt = "\nmirrored: interrupted (Ctrl-C): writing a checkpoint at the end of this step, then stopping; "
                      "press Ctrl-C again to stop at once\n";
  g_second_interrupt = str_cat("\nmirrored: interrupted again (Ctrl-C): stopping at once; the run resumes from the "
                               "newest checkpoint in ", dir, " when the same command runs again\n");
  g_terminated = str_cat("\nmirrored: SIGTERM: stopping at once (the launcher is ending the job: an interrupted "
                         "mpirun, scancel, a time limit); the run resumes from the newest checkpoint in ", dir,
                         " when the same command runs again\n");
}

void PreemptionHandler::on_step_end(TrainContext& ctx, const StepEnd& step) {
  // Every rank takes part every step, so the decision lands on the same step everywhere.
  const int32_t mine = g_signalled.load(std::memory_order_relaxed);
  const comm::CallSite site("preemption check");
  const int32_t any = ctx.strategy.num_replicas_in_sync() > 1
                          ? ctx.strategy.reduce(distribute::ReduceOp::kMax, mine)
                          : mine;
  if (any == kNothing) return;
  const int64_t step_end_ms = wall_milliseconds();
  Checkpointer().save(ctx, step.step, Checkpointer::Wait::kUntilDurable);
  ctx.strategy.communicator().barrier();  // the checkpoint is on disk before any rank exits
  ctx.stop_training = true;
  ctx.preempted = true;
  const std::string written =
      str_cat("checkpoint of step ", step.step, " written to ", checkpoint::checkpoint_dir(ctx.config));
  if (any == kResize) {
    ctx.resize_requested = true;
    if (ctx.strategy.is_chief()) report_resize(ctx, step.step, step_end_ms);
    return;
  }
  if (any == kInterrupt) {
    ctx.interrupted = true;
    chief_print(str_cat("interrupted (SIGINT, Ctrl-C): ", written, "; run the same command again to resume from it "
                        "(exit ", static_cast<int>(ExitCode::kInterrupted), ")"));
    return;
  }
  chief_print(str_cat("SIG", name_, " (preemption warning): ", written, "; exiting with status ",
                      static_cast<int>(ExitCode::kPreempted), " so the job can be requeued and resume"));
}

}  // namespace mirrored::train
