// train_with_extra_barrier RANK STEP [mirrored train options...]
// `mirrored train` through the same library calls (the configuration, the Runtime,
// app::run_training), with one callback more: at the end of step STEP, rank RANK issues a
// barrier on the strategy's communicator that no other rank issues. The ranks then disagree
// on the order of their collectives, which the watchdog and `mirrored trace` must name
// (tests/integration/collective_verdicts.sh). With STEP a multiple of log_every, the other
// ranks' next collective on that communicator is the log point's loss all-reduce.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "mirrored/app/run_training.h"
#include "mirrored/comm/health/flight_recorder.h"
#include "mirrored/config/config.h"
#include "mirrored/config/library_options.h"
#include "mirrored/core/error.h"
#include "mirrored/runtime/runtime.h"
#include "mirrored/train/callback.h"
#include "train_tool_main.h"

namespace {

using namespace mirrored;

class ExtraBarrier final : public train::Callback {
 public:
  ExtraBarrier(int rank, int64_t step) : rank_(rank), step_(step) {}

  // After the step's other callbacks (this one is added last), before the log point.
  void on_step_end(train::TrainContext& ctx, const train::StepEnd& end) override {
    comm::Communicator& comm = ctx.strategy.communicator();
    if (comm.rank() != rank_ || end.step != step_) return;
    const comm::CallSite site("extra barrier");
    comm.barrier();
  }

 private:
  int rank_;
  int64_t step_;
};

int train_with_extra_barrier(int& argc, char**& argv, int rank, int64_t step) {
  const config::TrainConfig config = config::parse_train_config(std::vector<std::string>(argv + 3, argv + argc));
  runtime::Runtime runtime(argc, argv, config::library_options(config).runtime);
  std::vector<std::unique_ptr<train::Callback>> extra;
  extra.push_back(std::make_unique<ExtraBarrier>(rank, step));
  const train::TrainSummary summary = app::run_training(config, runtime, std::move(extra));
  const int status = summary.too_few_replicas ? static_cast<int>(ExitCode::kTooFewReplicas) : 0;
  runtime.set_exit_status(status);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: train_with_extra_barrier RANK STEP [mirrored train options...]\n");
    return 2;
  }
  const int rank = std::atoi(argv[1]);
  const int64_t step = std::atoll(argv[2]);
  // The watchdog ends a job whose ranks disagree by itself, with its own message.
  return test_tools::run_as_mirrored_main([&] { return train_with_extra_barrier(argc, argv, rank, step); });
}
