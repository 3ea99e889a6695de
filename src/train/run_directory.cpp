#include "mirrored/train/run_directory.h"

#include <filesystem>
#include <fstream>

#include "mirrored/core/error.h"

namespace mirrored::train {

RunDirectory::RunDirectory(const TrainConfig& config, bool is_chief) : path_(config.out), active_(is_chief) {
  if (!active_) return;
  std::error_code error;
  std::filesystem::create_directories(path_, error);
  if (error)
    throw Error(ExitCode::kUsage, str_cat("out = '", path_, "': cannot create the run directory: ", error.message()),
                true);
  std::ofstream ini(file("config.ini"));
  ini << to_ini(config);
  if (!ini) throw Error(ExitCode::kFailure, str_cat("cannot write '", file("config.ini"), "'"), true);
  metrics_ = io::JsonlWriter(file("metrics.jsonl"), /*append=*/false);
}

std::string RunDirectory::file(const std::string& name) const {
  return (std::filesystem::path(path_) / name).string();
}

void RunDirectory::log_metrics(const io::JsonRecord& record) {
  if (active_) metrics_.write(record);
}

}  // namespace mirrored::train
