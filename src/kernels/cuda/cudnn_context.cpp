// cuDNN handle, tensor descriptors and the per-device context with its shared workspace.
#include <array>
#include <mutex>

#include "cudnn_check.h"
#include "cudnn_ops.h"
#include "mirrored/core/cuda_check.h"
#include "mirrored/core/error.h"

namespace mirrored::kernels::cuda::dnn {

CudnnHandle::CudnnHandle(int device, cudaStream_t stream) {
  set_cuda_device(device);
  MIRRORED_CUDNN_CHECK(cudnnCreate(&handle_));
  MIRRORED_CUDNN_CHECK(cudnnSetStream(handle_, stream));
}
CudnnHandle::~CudnnHandle() {
  if (handle_) MIRRORED_CUDNN_LOG(cudnnDestroy(handle_));
}
CudnnHandle& CudnnHandle::operator=(CudnnHandle&& other) noexcept {
  if (this != &other) {
    if (handle_) MIRRORED_CUDNN_LOG(cudnnDestroy(handle_));
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

TensorDesc::TensorDesc(int64_t n, int64_t c, int64_t h, int64_t w) {
  MIRRORED_CHECK(n <= INT32_MAX && c <= INT32_MAX && h <= INT32_MAX && w <= INT32_MAX,
                 "tensor dimensions exceed cuDNN's int");
  MIRRORED_CUDNN_CHECK(cudnnCreateTensorDescriptor(&desc_));
  MIRRORED_CUDNN_CHECK(cudnnSetTensor4dDescriptor(desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, static_cast<int>(n),
                                                  static_cast<int>(c), static_cast<int>(h), static_cast<int>(w)));
}
TensorDesc::~TensorDesc() {
  if (desc_) MIRRORED_CUDNN_LOG(cudnnDestroyTensorDescriptor(desc_));
}
TensorDesc& TensorDesc::operator=(TensorDesc&& other) noexcept {
  if (this != &other) {
    if (desc_) MIRRORED_CUDNN_LOG(cudnnDestroyTensorDescriptor(desc_));
    desc_ = std::exchange(other.desc_, nullptr);
  }
  return *this;
}

void* DnnContext::workspace_of_size(size_t bytes) {
  if (bytes == 0) return nullptr;
  if (workspace.bytes() < bytes) {
    // The old workspace may still be in use by queued work: wait before freeing it.
    MIRRORED_CUDA_CHECK(cudaStreamSynchronize(stream));
    workspace = DeviceBuffer(bytes, device);
  }
  return workspace.data();
}

DnnContext& dnn_context(int device) {
  // Once per device, kept for the life of the process (see compute_stream()).
  constexpr int kMaxDevices = 64;
  static std::array<std::once_flag, kMaxDevices> once;
  static std::array<DnnContext*, kMaxDevices> contexts{};
  MIRRORED_CHECK(device >= 0 && device < kMaxDevices, "CUDA device index ", device);
  const cudaStream_t stream = compute_stream(device);
  std::call_once(once[static_cast<size_t>(device)], [&] {
    auto* ctx = new DnnContext;
    ctx->device = device;
    ctx->stream = stream;
    ctx->handle = CudnnHandle(device, stream);
    contexts[static_cast<size_t>(device)] = ctx;
  });
  return *contexts[static_cast<size_t>(device)];
}

}  // namespace mirrored::kernels::cuda::dnn
