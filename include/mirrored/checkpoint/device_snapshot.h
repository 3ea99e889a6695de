#pragma once
// The host copy a background checkpoint (checkpoint.async) takes of float32 tensors, without
// stopping the step on a GPU for it:
//   take(): on a GPU, queues a device-to-host copy of each tensor on a stream of its own
//     (non-blocking: not ordered with the legacy stream) into page-locked host memory,
//     after the work the compute stream has queued so far (the copy stream waits on an
//     event recorded there; the compute stream itself waits for nothing), and records a
//     `copied` event behind the copies. Returns at once. The page-locked buffers are made
//     on first use and kept for the later snapshots while they are large enough: a 1.5 GB
//     model does not pay cudaHostAlloc per checkpoint. CPU tensors are copied in take().
//   guard_overwrites(): just before anything may change the tensors (the next optimizer
//     update), makes the compute stream wait on `copied`: queued there, no host wait, so
//     the next step's data, forward and backward overlap the copy.
//   wait(), values(): on any thread (the checkpoint writer's): wait on the host for
//     `copied`, then read the host copy.
// One snapshot at a time: take() first waits for the copies of the one before, and its
// values must have been read by then (CheckpointWriter keeps one write in flight, and the
// next checkpoint waits for it before it takes a snapshot).
#include <cstdint>
#include <memory>
#include <vector>

#include "mirrored/core/tensor.h"

namespace mirrored::checkpoint {

class DeviceSnapshot {
 public:
  DeviceSnapshot();
  // Waits for copies in flight (their buffers are freed here).
  ~DeviceSnapshot();
  DeviceSnapshot(const DeviceSnapshot&) = delete;
  DeviceSnapshot& operator=(const DeviceSnapshot&) = delete;

  // The tensors' values as the compute stream has them once its queued work is done. Every
  // tensor float32; those on GPUs all on one device, whose compute stream must exist
  // (a kernels::DeviceContext of it alive). A GPU build is needed for GPU tensors.
  void take(const std::vector<Tensor>& tensors);
  // Main thread, before the tensors may change: later work on the compute stream waits for
  // the copies. Does nothing when none are pending (cheap to call every step).
  void guard_overwrites();
  // Waits on the host until the copies are done.
  void wait() const;
  // Tensors in the last snapshot.
  size_t size() const;
  // Values [begin, begin + count) of tensor `index` of the last snapshot (waits first).
  std::vector<float> values(size_t index, int64_t begin, int64_t count) const;
  // All of tensor `index`'s values.
  std::vector<float> values(size_t index) const;
  // The same two into `into` (resized): a buffer with the capacity (the last checkpoint's)
  // is refilled without allocating.
  void copy_values(size_t index, int64_t begin, int64_t count, std::vector<float>& into) const;
  void copy_values(size_t index, std::vector<float>& into) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mirrored::checkpoint
