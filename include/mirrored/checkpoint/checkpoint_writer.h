#pragma once
// The one checkpoint writer. Every checkpoint file of a run is written here, by the chief,
// whatever asked for it: the Checkpointer's schedule and the run's last step
// (train/checkpointer.h), a preemption warning (train/preemption.h) and the recovery after a
// lost rank (elastic/elastic_run.h). write():
//   1. creates the directory (with its parents) when it is missing;
//   2. writes the file atomically through io::write_checkpoint (io/checkpoint_file.h): a
//      temporary file in the same directory, fsync, rename over the target, fsync of the
//      directory; a crash or a failed write leaves the files that were there as they were;
//   3. prunes: keeps the newest `keep` of its own files and removes the older ones. Its own
//      files are regular files named ckpt-<step>.h5 (checkpoint_store.h); anything else in
//      the directory (other names, directories, symbolic links) is neither counted nor
//      removed.
// One writer serves a whole run, across the Trainers a shrink replaces, so whatever must
// see a checkpoint on disk (a resume, the end of the run) asks the object that wrote it.
// write() returns once the file is durable.
#include <cstdint>
#include <string>

#include "mirrored/config/config.h"
#include "mirrored/io/checkpoint_file.h"

namespace mirrored::checkpoint {

class CheckpointWriter {
 public:
  // Files go to `dir`; the newest `keep` (at least 1) are kept.
  CheckpointWriter(std::string dir, int64_t keep);
  // checkpoint_dir(config), config.checkpoint_keep.
  explicit CheckpointWriter(const config::TrainConfig& config);

  // Writes `checkpoint` as the checkpoint of its step (checkpoint.step) and prunes; returns
  // the file's path. Error(kCheckpoint) naming the directory or the file and the cause when
  // the directory cannot be created or the file cannot be written.
  std::string write(const io::Checkpoint& checkpoint);

  // Where the checkpoint of `step` is written.
  std::string path(int64_t step) const;
  const std::string& dir() const { return dir_; }
  int64_t keep() const { return keep_; }

 private:
  void prune() const;

  std::string dir_;
  int64_t keep_;
};

}  // namespace mirrored::checkpoint
