#include "mirrored/checkpoint/run_directory.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include "mirrored/core/error.h"
#include "mirrored/core/file_replacement.h"
#include "mirrored/core/strings.h"

namespace mirrored::checkpoint {

RunDirectory::RunDirectory(const config::TrainConfig& config, bool is_chief)
    : path_(config.out), config_ini_(config::to_ini(config)), active_(is_chief) {}

void RunDirectory::create() const {
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

namespace {
// Removes the regular files directly in `directory` whose names start with `prefix` and end
// with `suffix` (symbolic links are not followed nor removed); returns how many went.
int64_t remove_files(const std::filesystem::path& directory, const std::string& prefix, const std::string& suffix) {
  std::error_code error;
  if (!std::filesystem::is_directory(std::filesystem::symlink_status(directory, error))) return 0;
  int64_t removed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
    const std::string name = entry.path().filename().string();
    if (name.size() < prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    std::error_code ignored;
    if (!entry.is_regular_file(ignored) || entry.is_symlink(ignored)) continue;
    if (std::filesystem::remove(entry.path(), ignored)) ++removed;
  }
  return removed;
}
}  // namespace

std::string RunDirectory::clear_earlier_run() {
  if (!active_) return "";
  const std::filesystem::path root(path_);
  std::vector<std::string> removed;
  const auto count = [&](int64_t n, const char* what) {
    if (n > 0) removed.push_back(str_cat(n, " ", what));
  };
  count(remove_files(root / "checkpoints", "ckpt-", ".h5"), "checkpoint(s)");
  count(remove_files(root / "tensorboard", "events.out.tfevents.", ""), "TensorBoard event file(s)");
  count(remove_files(root / "trace", "rank-", ".jsonl"), "flight-recorder dump(s)");
  if (remove_files(root, "metrics.jsonl", "") > 0) removed.push_back("metrics.jsonl");
  if (remove_files(root, "final.h5", "") > 0) removed.push_back("final.h5");
  return join(removed, ", ");
}

void RunDirectory::open_metrics(int64_t resumed_step) {
  if (!active_) return;
  create();
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
