#include "mirrored/train/preemption.h"

#include <atomic>
#include <csignal>

#include "mirrored/comm/health/flight_recorder.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/train/checkpointer.h"

namespace mirrored::train {
namespace {
// Written from a signal handler: must be lock-free to be async-signal-safe.
std::atomic<int> g_signalled{0};
static_assert(std::atomic<int>::is_always_lock_free);
std::atomic<bool> g_installed{false};

extern "C" void on_preemption_signal(int) { g_signalled.store(1, std::memory_order_relaxed); }

int signal_number(config::PreemptionSignal signal) {
  switch (signal) {
    case config::PreemptionSignal::kUsr1: return SIGUSR1;
    case config::PreemptionSignal::kUsr2: return SIGUSR2;
    case config::PreemptionSignal::kTerm: return SIGTERM;
    case config::PreemptionSignal::kNone: break;
  }
  throw Error(ExitCode::kFailure, "PreemptionHandler needs a signal (preemption_signal = none installs none)");
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
}  // namespace

struct PreemptionHandler::Saved {
  struct sigaction action;
};

PreemptionHandler::PreemptionHandler(config::PreemptionSignal signal)
    : signal_(signal_number(signal)), name_(signal_name(signal)) {
  MIRRORED_CHECK(!g_installed.exchange(true), "only one PreemptionHandler may exist at a time");
  g_signalled.store(0);
  saved_ = new Saved{};
  struct sigaction action {};
  action.sa_handler = &on_preemption_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // blocking calls (MPI, file I/O) carry on; the flag is read between steps
  if (sigaction(signal_, &action, &saved_->action) != 0) {
    delete saved_;
    g_installed = false;
    throw Error(ExitCode::kFailure, str_cat("cannot install a handler for SIG", name_));
  }
}

PreemptionHandler::~PreemptionHandler() {
  // A warning that arrives after the last step has nothing left to save, and the default
  // action would kill a finished run on its way out (and fail the job): ignore it then.
  if (saved_->action.sa_handler == SIG_DFL && !(saved_->action.sa_flags & SA_SIGINFO)) {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(signal_, &ignore, nullptr);
  } else {
    sigaction(signal_, &saved_->action, nullptr);
  }
  delete saved_;
  g_installed = false;
}


void PreemptionHandler::on_step_end(TrainContext& ctx, const StepEnd& step) {
  // Every rank takes part every step, so the decision lands on the same step everywhere.
  const int32_t mine = g_signalled.load(std::memory_order_relaxed);
  const comm::CallSite site("preemption check");
  const int32_t any = ctx.strategy.num_replicas_in_sync() > 1
                          ? ctx.strategy.reduce(distribute::ReduceOp::kMax, mine)
                          : mine;
  if (!any) return;
  Checkpointer().save(ctx, step.step);
  ctx.strategy.communicator().barrier();  // the checkpoint is on disk before any rank exits
  ctx.stop_training = true;
  ctx.preempted = true;
  chief_print(str_cat("SIG", name_, " (preemption warning): checkpoint of step ", step.step, " written to ",
                      checkpoint::checkpoint_dir(ctx.config), "; exiting with status ",
                      static_cast<int>(ExitCode::kPreempted), " so the job can be requeued and resume"));
}

}  // namespace mirrored::train
