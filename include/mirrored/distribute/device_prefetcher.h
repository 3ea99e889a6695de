#pragma once
// Moves training batches to a GPU ahead of use. A worker thread assembles the next batch
// on the host (the producer), copies it into page-locked memory and starts an
// asynchronous host-to-device copy on a copy stream, while the current step computes.
// Two slots alternate, each with its own pinned buffer and device tensors:
//  - the compute stream waits for a slot's copy with an event (no host wait);
//  - a slot's device tensors are overwritten only after the compute stream has passed an
//    event recorded once the step that read them was fully queued.
// CUDA build only (constructing one without CUDA throws).
#include <cstdint>
#include <functional>
#include <memory>

#include "mirrored/core/device.h"
#include "mirrored/core/tensor.h"

namespace mirrored::distribute {

class DevicePrefetcher {
 public:
  // Fills host `images` and `labels` for `step` (on the worker thread; must only read
  // shared state). The device tensors take their shapes and dtypes (float images and int32
  // labels, or int32 token inputs and targets).
  using Producer = std::function<void(int64_t step, Tensor& images, Tensor& labels)>;

  DevicePrefetcher(Device device, Producer produce);
  ~DevicePrefetcher();
  DevicePrefetcher(const DevicePrefetcher&) = delete;
  DevicePrefetcher& operator=(const DevicePrefetcher&) = delete;

  // The batch of `step` on the device, ordered before any kernel queued afterwards on the
  // compute stream; starts preparing `next_step` unless it is negative. The tensors stay
  // valid until the next call.
  struct DeviceBatch {
    const Tensor* images = nullptr;
    const Tensor* labels = nullptr;
  };
  DeviceBatch get(int64_t step, int64_t next_step);

  // Forgets every prepared batch (the step numbers start over: a new epoch's order).
  void reset();

  // Batches that were ready (copy started in the background) when asked for.
  int64_t prefetched() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mirrored::distribute
