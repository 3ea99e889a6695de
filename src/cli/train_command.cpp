#include <cstdio>
#include <filesystem>

#include "commands.h"
#include "mirrored/app/run_training.h"
#include "mirrored/checkpoint/init_from.h"
#include "mirrored/config/library_options.h"
#include "mirrored/core/log.h"
#include "mirrored/runtime/runtime.h"

namespace mirrored::cli {

namespace {
// Where this run's files go, and why there (config::resolve_run_directory).
std::string run_directory_line(const config::TrainConfig& config) {
  if (config.out_parent.empty()) return str_cat("run directory: ", config.out, " (--out)");
  const bool slurm = std::filesystem::path(config.out).filename().string().rfind("slurm-", 0) == 0;
  return str_cat("run directory: ", config.out, " (out = ", config.out_parent,
                 slurm ? ", a folder per Slurm job" : ", a folder per configuration of the result-changing keys",
                 "; --out DIR names it)");
}
}  // namespace

int train_command(int& argc, char**& argv, const Args& args) {
  bool help = false;
  // Every rank parses the same file and flags, so a bad value fails on all of them alike.
  config::TrainConfig config = config::parse_train_config(args, &help);
  if (help) {
    std::fputs(config::train_config_help().c_str(), stdout);
    return 0;
  }
  // The model's shape from the file it starts from, before anything is built or written.
  checkpoint::take_shape_from_init_from(config);
  if (config.dry_run) {
    // Before the runtime: no MPI, no device, no data; every rank would print the same.
    std::fputs(str_cat(run_directory_line(config), "\n", config::to_ini(config)).c_str(), stdout);
    return 0;
  }
  // Before the runtime, whose start-up lines (device = auto's choice) --quiet silences too.
  if (config.quiet) set_log_level(LogLevel::kQuiet);
  if (config.verbose) set_log_level(LogLevel::kVerbose);
  runtime::Runtime runtime(argc, argv, config::library_options(config).runtime);
  if (!runtime.core_binding().summary.empty()) chief_info(runtime.core_binding().summary);
  chief_info(str_cat("cluster:\n", runtime.cluster().table()));
  chief_info(run_directory_line(config));
  const train::TrainSummary summary = app::run_training(config, runtime);
  // A distinct status after a preemption checkpoint, so slurm/preemptible.sh requeues the job.
  int status = 0;
  if (summary.preempted) status = static_cast<int>(summary.interrupted ? ExitCode::kInterrupted : ExitCode::kPreempted);
  if (summary.preempted && summary.resize_requested) status = static_cast<int>(ExitCode::kResizeRequested);
  if (summary.too_few_replicas) status = static_cast<int>(ExitCode::kTooFewReplicas);
  runtime.set_exit_status(status);
  return status;
}

}  // namespace mirrored::cli
