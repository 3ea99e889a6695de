#include "mirrored/distribute/device_prefetcher.h"

#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include "mirrored/core/error.h"

#ifdef MIRRORED_WITH_CUDA
#include "mirrored/core/cuda_check.h"
#include "mirrored/core/cuda_resources.h"
#endif

namespace mirrored::distribute {

#ifdef MIRRORED_WITH_CUDA
namespace {
// Makes `t` a device buffer of `shape`, reusing its storage when large enough. A new one
// is not zeroed: zeroing is queued on the compute stream, which is not ordered with the
// copy stream, so it could land after the copy that fills the buffer.
void ensure_device_buffer(Tensor& t, const Shape& shape, DType dtype, Device device) {
  const size_t needed = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  if (t.defined() && t.dtype() == dtype && t.capacity_bytes() >= needed) {
    if (t.shape() != shape) t = t.view(0, shape);
    return;
  }
  t = Tensor::uninitialized(shape, dtype, device);
}

struct Slot {
  Tensor host_images, host_labels;      // assembled by the producer
  PinnedBuffer pinned;                  // their page-locked copy: [images | labels]
  Tensor images, labels;                // on the device
  CudaEvent copied;                     // on the copy stream: device tensors written
  CudaEvent released;                   // on the compute stream: the step reading them is queued
  bool copy_issued = false, release_recorded = false;
  int64_t step = -1;
};
}  // namespace

struct DevicePrefetcher::Impl {
  Device device;
  Producer produce;
  CudaStream copy_stream;
  Slot slots[2];
  int current = -1;        // slot handed out by the last get()
  int64_t prefetched = 0;

  std::mutex mutex;
  std::condition_variable wake, finished;
  int job_slot = -1;       // slot the worker is filling, -1 when idle
  bool job_done = true;
  std::exception_ptr error;
  bool stopping = false;
  std::thread worker;

  Impl(Device d, Producer p) : device(d), produce(std::move(p)), copy_stream(d.index, /*non_blocking=*/true) {
    for (Slot& slot : slots) {
      slot.copied = CudaEvent(d.index);
      slot.released = CudaEvent(d.index);
    }
    worker = std::thread([this] { run(); });
  }

  ~Impl() {
    {
      std::lock_guard lock(mutex);
      stopping = true;
    }
    wake.notify_all();
    worker.join();
  }

  // Assemble on the host, stage in pinned memory, start the copy. Worker thread.
  void fill(Slot& slot, int64_t step) {
    set_cuda_device(device.index);
    produce(step, slot.host_images, slot.host_labels);
    const size_t image_bytes = slot.host_images.bytes(), label_bytes = slot.host_labels.bytes();
    // The slot's previous copy read the pinned buffer: let it finish before rewriting it.
    if (slot.copy_issued) slot.copied.synchronize();
    if (slot.pinned.bytes() < image_bytes + label_bytes) slot.pinned = PinnedBuffer(image_bytes + label_bytes);
    auto* pinned = static_cast<char*>(slot.pinned.data());
    std::memcpy(pinned, slot.host_images.raw(), image_bytes);
    std::memcpy(pinned + image_bytes, slot.host_labels.raw(), label_bytes);
    // Kernels of the step that last read this slot must be done before it is overwritten.
    if (slot.release_recorded) slot.released.make_wait(copy_stream.get());
    ensure_device_buffer(slot.images, slot.host_images.shape(), slot.host_images.dtype(), device);
    ensure_device_buffer(slot.labels, slot.host_labels.shape(), slot.host_labels.dtype(), device);
    MIRRORED_CUDA_CHECK(cudaMemcpyAsync(slot.images.raw(), pinned, image_bytes, cudaMemcpyHostToDevice, copy_stream.get()));
    MIRRORED_CUDA_CHECK(cudaMemcpyAsync(slot.labels.raw(), pinned + image_bytes, label_bytes, cudaMemcpyHostToDevice,
                                        copy_stream.get()));
    slot.copied.record(copy_stream.get());
    slot.copy_issued = true;
    slot.step = step;
  }

  void run() {
    std::unique_lock lock(mutex);
    while (true) {
      wake.wait(lock, [this] { return stopping || (job_slot >= 0 && !job_done); });
      if (stopping) return;
      const int slot = job_slot;
      const int64_t step = slots[slot].step;
      lock.unlock();
      std::exception_ptr failure;
      try {
        fill(slots[slot], step);
      } catch (...) {
        failure = std::current_exception();
      }
      lock.lock();
      error = failure;
      job_done = true;
      finished.notify_all();
    }
  }

  void submit(int slot, int64_t step) {
    std::lock_guard lock(mutex);
    slots[slot].step = step;
    job_slot = slot;
    job_done = false;
    wake.notify_all();
  }

  void wait_for_job() {
    std::unique_lock lock(mutex);
    finished.wait(lock, [this] { return job_done; });
    if (error) std::rethrow_exception(std::exchange(error, nullptr));
  }
};

DevicePrefetcher::DevicePrefetcher(Device device, Producer produce) {
  MIRRORED_CHECK(device.is_cuda(), "DevicePrefetcher for ", device.str());
  impl_ = std::make_unique<Impl>(device, std::move(produce));
}

DevicePrefetcher::~DevicePrefetcher() = default;

DevicePrefetcher::DeviceBatch DevicePrefetcher::get(int64_t step, int64_t next_step) {
  Impl& m = *impl_;
  set_cuda_device(m.device.index);
  const cudaStream_t compute = compute_stream(m.device.index);
  if (m.current >= 0 && m.slots[m.current].step == step) {
    const Slot& same = m.slots[m.current];
    return {&same.images, &same.labels};
  }
  m.wait_for_job();  // whatever the worker was doing is finished
  // Every kernel of the step that used the current slot is queued by now.
  if (m.current >= 0) {
    m.slots[m.current].released.record(compute);
    m.slots[m.current].release_recorded = true;
  }
  int slot = m.current < 0 ? 0 : 1 - m.current;
  if (m.slots[slot].step == step && m.slots[slot].copy_issued) {
    ++m.prefetched;
  } else {
    m.submit(slot, step);  // not prefetched (first step, or a jump): fill it now
    m.wait_for_job();
  }
  m.slots[slot].copied.make_wait(compute);
  m.current = slot;
  if (next_step >= 0) m.submit(1 - slot, next_step);
  return {&m.slots[slot].images, &m.slots[slot].labels};
}

void DevicePrefetcher::reset() {
  impl_->wait_for_job();
  for (Slot& slot : impl_->slots) slot.step = -1;
}

int64_t DevicePrefetcher::prefetched() const { return impl_->prefetched; }

#else
struct DevicePrefetcher::Impl {};
DevicePrefetcher::DevicePrefetcher(Device device, Producer) {
  throw Error(ExitCode::kUsage, str_cat("cannot prefetch to ", device.str(), ": this build of mirrored has no CUDA support"),
              true);
}
DevicePrefetcher::~DevicePrefetcher() = default;
DevicePrefetcher::DeviceBatch DevicePrefetcher::get(int64_t, int64_t) { return {}; }
void DevicePrefetcher::reset() {}
int64_t DevicePrefetcher::prefetched() const { return 0; }
#endif

}  // namespace mirrored::distribute
