// cuBLAS and cuDNN handles, each bound to the compute stream it was created for.
#include "library_handles.h"

#include "cublas_check.h"
#include "cudnn_check.h"
#include "mirrored/core/cuda_resources.h"

namespace mirrored::kernels::cuda {

CublasHandle::CublasHandle(int device, cudaStream_t stream) {
  set_cuda_device(device);
  MIRRORED_CUBLAS_CHECK(cublasCreate(&handle_));
  MIRRORED_CUBLAS_CHECK(cublasSetStream(handle_, stream));
  // Default math: float32 products in float32, no TF32 tensor cores (an opt-in mode,
  // CUBLAS_TF32_TENSOR_OP_MATH), which would break the 1e-5 agreement with the CPU kernels
  // that the tests and the world-size equivalence rely on. Pedantic math would add nothing
  // here but slower kernels.
  MIRRORED_CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH));
}

CublasHandle::~CublasHandle() {
  if (handle_) MIRRORED_CUBLAS_LOG(cublasDestroy(handle_));
}

CublasHandle& CublasHandle::operator=(CublasHandle&& other) noexcept {
  if (this != &other) {
    if (handle_) MIRRORED_CUBLAS_LOG(cublasDestroy(handle_));
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

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

}  // namespace mirrored::kernels::cuda
