#ifdef MIRRORED_WITH_CUDA
#include "mirrored/core/cuda_resources.h"

#include <array>
#include <memory>
#include <mutex>

#include "mirrored/core/cuda_check.h"
#include "mirrored/core/error.h"

namespace mirrored {

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
void CudaStream::synchronize() const { MIRRORED_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

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
  if (status == cudaErrorNotReady) return false;
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

cudaStream_t compute_stream(int device) {
  // One per device for the life of the process. Deliberately never destroyed: a static
  // destructor would run after the CUDA runtime may already have shut down.
  constexpr int kMaxDevices = 64;
  static std::array<std::once_flag, kMaxDevices> once;
  static std::array<cudaStream_t, kMaxDevices> streams{};
  MIRRORED_CHECK(device >= 0 && device < kMaxDevices, "CUDA device index ", device);
  set_cuda_device(device);
  std::call_once(once[static_cast<size_t>(device)], [device] {
    MIRRORED_CUDA_CHECK(cudaStreamCreateWithFlags(&streams[static_cast<size_t>(device)], cudaStreamDefault));
  });
  return streams[static_cast<size_t>(device)];
}

}  // namespace mirrored
#endif  // MIRRORED_WITH_CUDA
