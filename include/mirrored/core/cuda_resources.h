#pragma once
// Owning wrappers for CUDA runtime objects: movable, not copyable, and destructors that
// log instead of throwing. CUDA build only.
//
// Streams: every device in use has one compute stream (compute_stream()), owned by that
// device's kernels::DeviceContext (created by runtime::Runtime after cudaSetDevice, or
// by code that runs without a Runtime, such as unit tests), which registers it here for
// its lifetime. It is a *blocking* stream, so the synchronous host copies in
// cuda_memory.h (cudaMemcpy on the legacy default stream) stay ordered with the kernels.
// Communication and host-to-device copies run on their own non-blocking streams and are
// ordered against the compute stream with events only.
#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

namespace mirrored {

// Makes `device` current for the calling thread (each thread has its own current device).
void set_cuda_device(int device);

// After cudaEventQuery or cudaStreamQuery answered cudaErrorNotReady: the runtime keeps that
// answer as the thread's last error, and the next launch check (cudaGetLastError, see
// MIRRORED_CUDA_CHECK_LAUNCH) would report it as the launch's failure. This takes it back;
// any other error found there is thrown. Every poll of an event or stream calls it.
void clear_not_ready();

class CudaStream {
 public:
  CudaStream() = default;
  // A new stream on `device`; non_blocking: not implicitly ordered with the legacy stream.
  CudaStream(int device, bool non_blocking);
  ~CudaStream();
  CudaStream(CudaStream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)), device_(other.device_) {}
  CudaStream& operator=(CudaStream&& other) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  cudaStream_t get() const { return stream_; }
  int device() const { return device_; }

 private:
  cudaStream_t stream_ = nullptr;
  int device_ = 0;
};

class CudaEvent {
 public:
  CudaEvent() = default;
  // Timing is off: an event used only for ordering is cheaper to record and wait on.
  explicit CudaEvent(int device, bool timing = false);
  ~CudaEvent();
  CudaEvent(CudaEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  CudaEvent& operator=(CudaEvent&& other) noexcept;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream) const;
  // Work queued on `stream` after this call waits for the recorded work (no host wait).
  void make_wait(cudaStream_t stream) const;
  // cudaEventQuery: true when the recorded work has finished; a not-ready answer is cleared
  // from the thread's last error (clear_not_ready).
  bool done() const;
  void synchronize() const;

 private:
  cudaEvent_t event_ = nullptr;
};

// Page-locked host memory: the only kind a host-to-device copy can run asynchronously from.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Device memory owned outside a Tensor (scratch space, staging areas).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(size_t bytes, int device);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// The compute stream of `device` (see above); also makes `device` current. Throws when no
// DeviceContext of that device is alive.
cudaStream_t compute_stream(int device);

// For kernels::DeviceContext only: `stream` is the compute stream of `device` from
// register_ to unregister_. Registrations nest: the newest one is in force, and removing
// it brings back the one before (a test fixture's context under a Runtime's, say).
void register_compute_stream(int device, cudaStream_t stream);
void unregister_compute_stream(int device, cudaStream_t stream) noexcept;

}  // namespace mirrored
