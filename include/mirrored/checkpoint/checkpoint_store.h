#pragma once
// Where a run's checkpoints live and which there are: <out>/checkpoints/ckpt-<step>.h5
// (checkpoint_writer.h writes them; resume = auto continues from the newest that verifies).
#include <cstdint>
#include <string>
#include <vector>

#include "mirrored/config/config.h"

namespace mirrored::checkpoint {

std::string checkpoint_dir(const config::TrainConfig& config);  // <out>/checkpoints
std::string checkpoint_file_name(int64_t step);          // ckpt-000000120.h5
// Checkpoint files in `dir` (ckpt-*.h5), newest (highest step) first; none when `dir`
// does not exist.
std::vector<std::string> list_checkpoints(const std::string& dir);

// True when `config` asks for a checkpoint after `step` steps by step count (the trainer
// makes such a step a log point).
bool checkpoint_step(const config::TrainConfig& config, int64_t step);

}  // namespace mirrored::checkpoint
