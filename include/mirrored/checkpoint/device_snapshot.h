#pragma once
// The host copy a background checkpoint (checkpoint.async) takes of float32 tensors, without
// stopping the step for it:
//   take(): on a GPU, queues a device-to-host copy of each tensor on a stream of its own
//     (non-blocking: not ordered with the legacy stream) into page-locked host memory,
//     after the work the compute stream has queued so far (the copy stream waits on an
//     event recorded there; the compute stream itself waits for nothing), and records a
//     `copied` event behind the copies. Returns at once. The page-locked buffers are made
//     on first use and kept for the later snapshots while they are large enough: a 1.5 GB
//     model does not pay cudaHostAlloc per checkpoint. CPU tensors are not copied at all
//     here: the snapshot holds them, and the writer thread reads their values straight
//     into the checkpoint (copy_values) while the next step's forward and backward, which
//     only read them, run; release() says it is done with them.
//   guard_overwrites(): just before anything may change the tensors (the next update). On
//     a GPU, makes the compute stream wait on `copied`: queued there, no host wait, so the
//     next step's data, forward and backward overlap the copy. For CPU tensors not yet
//     released, copies them into host buffers of the snapshot's own first (waiting for a
//     copy_values call in progress, never for the writer to start): the cost the step
//     paid before, now paid only when the writer falls behind a whole forward and backward.
//   wait(), values(): on any thread (the checkpoint writer's): wait on the host for
//     `copied`, then read the host copy (or the held CPU tensor, until guarded).
// One snapshot at a time: take() first waits for the copies of the one before, and its
// values must have been read by then (CheckpointWriter keeps one write in flight, and the
// next checkpoint waits for it before it takes a snapshot).
#include <cstdint>
#include <memory>
#include <optional>
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
  // Writer thread, after its last copy_values(): the held CPU tensors are no longer read, so
  // the step may overwrite them without a copy (and their memory is not kept alive by the
  // snapshot). Values of CPU tensors cannot be read after it.
  void release();
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
  // With `crc`: also sets it to io::crc32_ieee of the values copied, checksummed as they are
  // copied (one pass over memory, not two).
  void copy_values(size_t index, int64_t begin, int64_t count, std::vector<float>& into,
                   std::optional<uint32_t>* crc = nullptr) const;
  void copy_values(size_t index, std::vector<float>& into, std::optional<uint32_t>* crc = nullptr) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mirrored::checkpoint
