#include <cstdio>

#include "commands.h"
#include "mirrored/core/log.h"
#include "mirrored/distribute/runtime.h"
#include "mirrored/train/trainer.h"

namespace mirrored::cli {
namespace {
distribute::Launch launch_of(const std::string& name) {
  if (name == "mpi") return distribute::Launch::kMpi;
  if (name == "local") return distribute::Launch::kLocal;
  return distribute::Launch::kAuto;
}
distribute::DeviceChoice device_of(const std::string& name) {
  if (name == "cuda") return distribute::DeviceChoice::kCuda;
  if (name == "auto") return distribute::DeviceChoice::kAuto;
  return distribute::DeviceChoice::kCpu;
}
}  // namespace

distribute::RuntimeOptions runtime_options(const train::TrainConfig& config) {
  return {launch_of(config.launch), device_of(config.device), false, config.collective_timeout_s};
}

int train_command(int& argc, char**& argv, const Args& args) {
  bool help = false;
  // Every rank parses the same file and flags, so a bad value fails on all of them alike.
  const train::TrainConfig config = train::parse_train_config(args, &help);
  if (help) {
    std::fputs(train::train_config_help().c_str(), stdout);
    return 0;
  }
  distribute::Runtime runtime(argc, argv, runtime_options(config));
  if (config.quiet) set_log_level(LogLevel::kQuiet);
  if (config.verbose) set_log_level(LogLevel::kVerbose);
  chief_info(str_cat("cluster:\n", runtime.cluster().table()));
  const train::TrainSummary summary = train::run_training(config, runtime);
  // A distinct status after a preemption checkpoint, so slurm/preemptible.sh requeues the job.
  return summary.preempted ? static_cast<int>(ExitCode::kPreempted) : 0;
}

}  // namespace mirrored::cli
