#include "mirrored/comm/health/trace_signal.h"

#include <csignal>

#include "mirrored/comm/health/flight_recorder.h"

namespace mirrored::comm {
namespace {
extern "C" void on_trace_signal(int) { request_trace_dump(); }
}  // namespace

struct TraceDumpSignal::Saved {
  struct sigaction action;
};

TraceDumpSignal::TraceDumpSignal(bool usr2_preempts) {
  if (usr2_preempts) return;
  saved_ = new Saved{};
  struct sigaction action {};
  action.sa_handler = &on_trace_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // MPI and file I/O carry on; the watchdog thread reads the flag
  installed_ = sigaction(SIGUSR2, &action, &saved_->action) == 0;
}

TraceDumpSignal::~TraceDumpSignal() {
  if (installed_) sigaction(SIGUSR2, &saved_->action, nullptr);
  delete saved_;
}

}  // namespace mirrored::comm
