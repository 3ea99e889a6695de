#ifdef MIRRORED_WITH_CUDA
#include "mirrored/core/cuda_resources.h"

#include <array>
#include <memory>
#include <mutex>
#include <vector>

#include "mirrored/core/cuda_check.h"
#include "mirrored/core/error.h"

namespace mirrored {

void clear_not_ready() {
  // cudaGetLastError returns the thread's last error and resets it to cudaSuccess. Right
  // after a query answered cudaErrorNotReady that is the not-ready status itself (a launch
  // error before it would already have been checked where the launch was).
  const cudaError_t last = cudaGetLastError();
  if (last != cudaSuccess && last != cudaErrorNotReady) MIRRORED_CUDA_CHECK(last);
}

void set_cuda_device(int device) {
  int current = -1;
  MIRRORED_CUDA_CHECK(cudaGetDevice(&current));
  if (current != device) MIRRORED_CUDA_CHECK(cudaSetDevice(device));
}

CudaStream::CudaStream(int device, bool non_blocking) : device_(device) {
  set_cuda_device(device);
  MIRRORED_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, non_blocking ? cudaStreamNonBlocking : cudaStreamDefault));
}
CudaStream::~CudaStream() {
  if (stream_) MIRRORED_CUDA_LOG(cudaStreamDestroy(stream_));
}
CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  if (this != &other) {
    if (stream_) MIRRORED_CUDA_LOG(cudaStreamDestroy(stream_));
    stream_ = std::exchange(other.stream_, nullptr);
    device_ = other.device_;
  }
  return *this;
}

CudaEvent::CudaEvent(int device, bool timing) {
  set_cuda_device(device);
  MIRRORED_CUDA_CHECK(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
}
CudaEvent::~CudaEvent() {
  if (event_) MIRRORED_CUDA_LOG(cudaEventDestroy(event_));
}
CudaEvent& CudaEvent::operator=(CudaEvent&& other) noexcept {
  if (this != &other) {
    if (event_) MIRRORED_CUDA_LOG(cudaEventDestroy(event_));
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}
void CudaEvent::record(cudaStream_t stream) const { MIRRORED_CUDA_CHECK(cudaEventRecord(event_, stream)); }
void CudaEvent::make_wait(cudaStream_t stream) const { MIRRORED_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0)); }
bool CudaEvent::done() const {
  const cudaError_t status = cudaEventQuery(event_);
  if (status == cudaErrorNotReady) {
    clear_not_ready();
    return false;
  }
  MIRRORED_CUDA_CHECK(status);
  return true;
}
void CudaEvent::synchronize() const { MIRRORED_CUDA_CHECK(cudaEventSynchronize(event_)); }

PinnedBuffer::PinnedBuffer(size_t bytes) : bytes_(bytes) {
  MIRRORED_CUDA_CHECK(cudaMallocHost(&data_, bytes == 0 ? 1 : bytes));
}
PinnedBuffer::~PinnedBuffer() {
  if (data_) MIRRORED_CUDA_LOG(cudaFreeHost(data_));
}
PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) MIRRORED_CUDA_LOG(cudaFreeHost(data_));
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::DeviceBuffer(size_t bytes, int device) : bytes_(bytes) {
  set_cuda_device(device);
  MIRRORED_CUDA_CHECK(cudaMalloc(&data_, bytes == 0 ? 1 : bytes));
}
DeviceBuffer::~DeviceBuffer() {
  if (data_) MIRRORED_CUDA_LOG(cudaFree(data_));
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) MIRRORED_CUDA_LOG(cudaFree(data_));
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

namespace {
// The compute streams of the live kernels::DeviceContext objects, innermost last, per
// device. Plain storage, no owned CUDA objects: it is empty whenever no context is alive.
constexpr int kMaxDevices = 64;
std::mutex streams_mutex;
std::array<std::vector<cudaStream_t>, kMaxDevices> registered_streams;

size_t device_slot(int device) {
  MIRRORED_CHECK(device >= 0 && device < kMaxDevices, "CUDA device index ", device);
  return static_cast<size_t>(device);
}
}  // namespace

void register_compute_stream(int device, cudaStream_t stream) {
  const size_t slot = device_slot(device);
  std::lock_guard lock(streams_mutex);
  registered_streams[slot].push_back(stream);
}

void unregister_compute_stream(int device, cudaStream_t stream) noexcept {
  if (device < 0 || device >= kMaxDevices) return;
  std::lock_guard lock(streams_mutex);
  auto& stack = registered_streams[static_cast<size_t>(device)];
  for (auto it = stack.end(); it != stack.begin();) {
    if (*--it == stream) {
      stack.erase(it);
      return;
    }
  }
}

cudaStream_t compute_stream(int device) {
  const size_t slot = device_slot(device);
  cudaStream_t stream = nullptr;
  {
    std::lock_guard lock(streams_mutex);
    const auto& stack = registered_streams[slot];
    MIRRORED_CHECK(!stack.empty(), "no compute stream for cuda:", device,
                   ": work on a GPU needs a live kernels::DeviceContext for it (runtime::Runtime creates one; "
                   "code without a Runtime creates its own)");
    stream = stack.back();
  }
  set_cuda_device(device);
  return stream;
}

}  // namespace mirrored
#endif  // MIRRORED_WITH_CUDA
