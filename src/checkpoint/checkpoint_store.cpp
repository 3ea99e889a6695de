#include "mirrored/checkpoint/checkpoint_store.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>


namespace mirrored::checkpoint {
namespace fs = std::filesystem;
namespace {

constexpr const char* kPrefix = "ckpt-";
constexpr const char* kSuffix = ".h5";

// Step of a checkpoint file name, or -1 when the name is not one.
int64_t step_of(const std::string& name) {
  const std::string prefix = kPrefix, suffix = kSuffix;
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return -1;
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(digits);
}

}  // namespace

std::string checkpoint_dir(const config::TrainConfig& config) {
  return (fs::path(config.out) / "checkpoints").string();
}

std::string checkpoint_file_name(int64_t step) {
  char name[64];
  std::snprintf(name, sizeof(name), "%s%09lld%s", kPrefix, static_cast<long long>(step), kSuffix);
  return name;
}

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    const int64_t step = step_of(it->path().filename().string());
    if (step >= 0 && it->is_regular_file(error)) found.emplace_back(step, it->path().string());
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> paths;
  for (auto& entry : found) paths.push_back(std::move(entry.second));
  return paths;
}

bool checkpoint_step(const config::TrainConfig& config, int64_t step) {
  return config.checkpoint_every_steps > 0 && step > 0 && step % config.checkpoint_every_steps == 0;
}

bool save_at_log_point(const config::TrainConfig& config, int64_t step, int64_t steps_per_epoch,
                       int64_t total_steps, bool stopping) {
  const bool epoch_ends = step % steps_per_epoch == 0 || step >= total_steps || stopping;
  return checkpoint_step(config, step) && !epoch_ends;
}

bool save_at_epoch_end(const config::TrainConfig& config, int64_t step, int64_t epoch, int64_t steps_per_epoch,
                       int64_t total_steps, bool stopping) {
  const bool enabled = config.checkpoint_every_steps > 0 || config.checkpoint_every_epochs > 0;
  const bool whole_epoch = step % steps_per_epoch == 0;
  const bool by_epoch =
      whole_epoch && config.checkpoint_every_epochs > 0 && (epoch + 1) % config.checkpoint_every_epochs == 0;
  const bool last = step >= total_steps || stopping;
  return enabled && (by_epoch || checkpoint_step(config, step) || last);
}

}  // namespace mirrored::checkpoint
