#include "mirrored/checkpoint/checkpoint_writer.h"

#include <filesystem>
#include <utility>

#include <hdf5.h>
#include <pthread.h>

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

CheckpointWriter::~CheckpointWriter() {
  try {
    wait();
  } catch (const std::exception& e) {
    rank_warning(str_cat("the last checkpoint was not written: ", e.what()));
  }
}

bool CheckpointWriter::background_writes(const config::TrainConfig& config) {
  hbool_t thread_safe = 0;
  return config.checkpoint_async && H5is_library_threadsafe(&thread_safe) >= 0 && thread_safe != 0;
}

std::string CheckpointWriter::path(int64_t step) const { return (fs::path(dir_) / checkpoint_file_name(step)).string(); }

std::string CheckpointWriter::write(const io::Checkpoint& checkpoint) {
  wait();
  return write_now(checkpoint);
}

// Reads only dir_ and keep_ (fixed at construction), so it may run on the writer thread.
std::string CheckpointWriter::write_now(const io::Checkpoint& checkpoint) const {
  std::error_code error;
  fs::create_directories(dir_, error);
  if (error)
    throw Error(ExitCode::kCheckpoint, str_cat("cannot create checkpoint directory '", dir_, "': ", error.message()));
  const std::string file = path(checkpoint.step);
  io::write_checkpoint(file, checkpoint);  // atomic: temporary, fsync, rename, directory fsync
  prune();
  return file;
}

void CheckpointWriter::write_in_background(io::Checkpoint checkpoint) {
  write_in_background(std::move(checkpoint), {});
}

void CheckpointWriter::write_in_background(io::Checkpoint checkpoint,
                                           std::function<void(io::Checkpoint&)> complete) {
  wait();
  // The thread owns the checkpoint; failure_ and spent_ are written by it and read only
  // after join().
  writer_ = std::thread([this, checkpoint = std::move(checkpoint), complete = std::move(complete)]() mutable {
    pthread_setname_np(pthread_self(), "ckpt-writer");  // as top -H and perf name it
    try {
      if (complete) complete(checkpoint);
      write_now(checkpoint);
    } catch (...) {
      failure_ = std::current_exception();
    }
    spent_ = std::move(checkpoint);
  });
}

DeviceSnapshot& CheckpointWriter::device_snapshot() {
  if (!snapshot_) snapshot_ = std::make_unique<DeviceSnapshot>();
  return *snapshot_;
}

void CheckpointWriter::wait() {
  if (writer_.joinable()) writer_.join();
  if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
}

void CheckpointWriter::keep_spent(io::Checkpoint checkpoint) {
  wait();
  spent_ = std::move(checkpoint);
}

io::Checkpoint CheckpointWriter::take_spent() {
  wait();
  return std::exchange(spent_, io::Checkpoint{});
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
