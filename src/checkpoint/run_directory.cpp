#include "mirrored/checkpoint/run_directory.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "mirrored/core/error.h"
#include "mirrored/core/file_replacement.h"

namespace mirrored::checkpoint {

RunDirectory::RunDirectory(const config::TrainConfig& config, bool is_chief)
    : path_(config.out), config_ini_(config::to_ini(config)), active_(is_chief) {
  if (!active_) return;
  std::error_code error;
  std::filesystem::create_directories(path_, error);
  if (error)
    throw Error(ExitCode::kUsage, str_cat("out = '", path_, "': cannot create the run directory: ", error.message()),
                true);
}

std::string RunDirectory::file(const std::string& name) const {
  return (std::filesystem::path(path_) / name).string();
}

void RunDirectory::log_metrics(const io::JsonRecord& record) {
  if (!active_) return;
  if (!metrics_.is_open()) open_metrics();
  metrics_.write(record);
}

void RunDirectory::open_metrics(int64_t resumed_step) {
  if (!active_) return;
  replace_file(file("config.ini"), config_ini_);
  const std::string path = file("metrics.jsonl");
  if (resumed_step > 0 && std::filesystem::exists(path)) {
    // Keep whole records (a killed run may have left half a line) up to the resume step.
    // The cut-back file replaces the old one whole or not at all: on a full disk the run
    // stops (Error kWriteFailed) with every record kept.
    std::ifstream in(path);
    std::string kept, line;
    while (std::getline(in, line)) {
      if (line.empty() || line.back() != '}') continue;
      const size_t at = line.find("\"step\": ");
      if (at != std::string::npos && std::strtoll(line.c_str() + at + 8, nullptr, 10) > resumed_step) continue;
      kept += line + "\n";
    }
    if (in.bad()) throw Error(ExitCode::kWriteFailed, str_cat("cannot read '", path, "' to cut it back to step ",
                                                              resumed_step, "; it is unchanged"), true);
    replace_file(path, kept);
  }
  metrics_ = io::JsonlWriter(path, /*append=*/resumed_step > 0);
}

}  // namespace mirrored::checkpoint
