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
//
// write_in_background() (checkpoint.async) hands the same three steps to a thread of its
// own and returns at once: the caller has already taken the snapshot (the checkpoint's
// values are host copies the step no longer touches), so only the file's encoding, fsync and
// rename leave the step. At most one write is in flight: the next write, wait() and the
// destructor first let it finish. The thread makes no collective and touches nothing but its
// own checkpoint and this writer's directory, so training collectives never share a
// communicator with it. A write that fails in the background is reported by the next
// write(), write_in_background() or wait() on the calling thread (the destructor, which may
// not throw, logs it). A process that dies mid-write leaves the files as they were (step 2).
//
// The snapshot of the parameters (and unsharded optimizer state) leaves the step too:
// device_snapshot() queues their copies on a side stream into page-locked memory the writer
// keeps for the run on a GPU, and holds the tensors themselves on the CPU
// (checkpoint/device_snapshot.h); the `complete` step of write_in_background() runs first on
// the writer thread: it waits for those copies, or reads the held tensors, and puts their
// values into the checkpoint. wait() therefore also means the copies are done.
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "mirrored/checkpoint/device_snapshot.h"
#include "mirrored/config/config.h"
#include "mirrored/io/checkpoint_file.h"

namespace mirrored::checkpoint {

class CheckpointWriter {
 public:
  // Files go to `dir`; the newest `keep` (at least 1) are kept.
  CheckpointWriter(std::string dir, int64_t keep);
  // checkpoint_dir(config), config.checkpoint_keep.
  explicit CheckpointWriter(const config::TrainConfig& config);
  // Lets a write in flight finish (logging its failure: a destructor cannot throw).
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Writes `checkpoint` as the checkpoint of its step (checkpoint.step) and prunes; returns
  // the file's path. Error(kCheckpoint) naming the directory or the file and the cause when
  // the directory cannot be created or the file cannot be written.
  // Waits for a write in flight first (and reports its failure).
  std::string write(const io::Checkpoint& checkpoint);

  // Waits for the write in flight (reporting its failure as write() would), then starts
  // writing `checkpoint` on a background thread and returns; the file is durable once
  // wait() returns. Its path is path(checkpoint.step).
  void write_in_background(io::Checkpoint checkpoint);
  // The same, with `complete(checkpoint)` run on the writer thread before the file is
  // written: it fills in the values a device snapshot still has in flight. A throw from it
  // is the write's failure (the files stay as they were).
  void write_in_background(io::Checkpoint checkpoint, std::function<void(io::Checkpoint&)> complete);

  // The snapshot background writes take (host copies of device tensors, CPU tensors held
  // for the writer thread), made on first use and kept for the run (its page-locked
  // buffers are reused by every later checkpoint).
  DeviceSnapshot& device_snapshot();
  // The same, or null before the first use: the step asks it every update
  // (DeviceSnapshot::guard_overwrites) without making one.
  DeviceSnapshot* device_snapshot_in_use() { return snapshot_.get(); }

  // Returns once no write is in flight; rethrows the failure of the last background write.
  void wait();

  // The host buffers of a written checkpoint, for the next snapshot to refill instead of
  // allocating: fresh memory is faulted in and zeroed by the kernel as it is first written
  // (10 MB per checkpoint on the gpt recipe), which a checkpoint after every step pays
  // every step. A background write keeps its checkpoint once the file is written (or has
  // failed); keep_spent() hands over one the caller wrote itself. take_spent() waits for the write in flight (reporting its failure as wait()
  // does) and returns the kept checkpoint, or an empty one; its values are stale, to be
  // overwritten. One is kept at a time: the run holds a second host copy of its state
  // between checkpoints, as a GPU run holds the device snapshot's page-locked buffers.
  void keep_spent(io::Checkpoint checkpoint);
  io::Checkpoint take_spent();
  bool writing() const { return writer_.joinable(); }

  // checkpoint.async and an HDF5 library built thread-safe (the data pipeline may read HDF5
  // files on other threads while a checkpoint is written): write_in_background() is what
  // the run's checkpoints use; otherwise write().
  static bool background_writes(const config::TrainConfig& config);

  // Where the checkpoint of `step` is written.
  std::string path(int64_t step) const;
  const std::string& dir() const { return dir_; }
  int64_t keep() const { return keep_; }

 private:
  std::string write_now(const io::Checkpoint& checkpoint) const;
  void prune() const;

  std::string dir_;
  int64_t keep_;
  std::unique_ptr<DeviceSnapshot> snapshot_;  // read by the write in flight, if any
  std::thread writer_;           // the write in flight, if any
  std::exception_ptr failure_;   // its failure, read after joining it
  io::Checkpoint spent_;         // the last checkpoint written; the write in flight's, read after joining it
};

}  // namespace mirrored::checkpoint
