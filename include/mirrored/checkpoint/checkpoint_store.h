#pragma once
// Where a run's checkpoints live, which there are, and when a run saves one:
// <out>/checkpoints/ckpt-<step>.h5 (checkpoint_writer.h writes them and keeps the newest
// checkpoint.keep; resume_policy.h chooses the one a run continues from).
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

// When to save. True when `config` asks for a checkpoint after `step` steps by step count
// (the trainer makes such a step a log point).
bool checkpoint_step(const config::TrainConfig& config, int64_t step);
// At the log point after `step` steps: a checkpoint step, unless the epoch (or the run:
// `total_steps` reached, or `stopping`) ends there; the epoch's end saves that one, after
// its evaluation, so a resumed run never repeats or skips an evaluation.
bool save_at_log_point(const config::TrainConfig& config, int64_t step, int64_t steps_per_epoch,
                       int64_t total_steps, bool stopping);
// At the end of epoch `epoch` (0-based), after `step` steps, with checkpoints on
// (checkpoint.every_steps or .every_epochs > 0): every checkpoint.every_epochs whole
// epochs, a checkpoint step, and the run's last state (`total_steps` reached, or
// `stopping`), which is always kept so the run can be extended later.
bool save_at_epoch_end(const config::TrainConfig& config, int64_t step, int64_t epoch, int64_t steps_per_epoch,
                       int64_t total_steps, bool stopping);

}  // namespace mirrored::checkpoint
