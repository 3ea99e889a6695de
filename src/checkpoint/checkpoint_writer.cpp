#include "mirrored/checkpoint/checkpoint_writer.h"

#include <filesystem>

#include "mirrored/checkpoint/checkpoint_store.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"

namespace mirrored::checkpoint {
namespace fs = std::filesystem;

CheckpointWriter::CheckpointWriter(std::string dir, int64_t keep) : dir_(std::move(dir)), keep_(keep) {
  MIRRORED_CHECK(keep_ >= 1, "a checkpoint writer keeps at least 1 file, not ", keep_);
}

CheckpointWriter::CheckpointWriter(const config::TrainConfig& config)
    : CheckpointWriter(checkpoint_dir(config), config.checkpoint_keep) {}

std::string CheckpointWriter::path(int64_t step) const { return (fs::path(dir_) / checkpoint_file_name(step)).string(); }

std::string CheckpointWriter::write(const io::Checkpoint& checkpoint) {
  std::error_code error;
  fs::create_directories(dir_, error);
  if (error)
    throw Error(ExitCode::kCheckpoint, str_cat("cannot create checkpoint directory '", dir_, "': ", error.message()));
  const std::string file = path(checkpoint.step);
  io::write_checkpoint(file, checkpoint);  // atomic: temporary, fsync, rename, directory fsync
  prune();
  return file;
}

// Newest first: the first `keep_` of this writer's files stay.
void CheckpointWriter::prune() const {
  int64_t kept = 0;
  for (const std::string& file : list_checkpoints(dir_)) {
    std::error_code error;
    if (fs::is_symlink(file, error) || error) continue;  // not a file this writer made
    if (kept < keep_) {
      ++kept;
      continue;
    }
    if (!fs::remove(file, error) && error)
      rank_warning(str_cat("cannot remove old checkpoint '", file, "' (checkpoint.keep = ", keep_, "): ",
                           error.message()));
  }
}

}  // namespace mirrored::checkpoint
