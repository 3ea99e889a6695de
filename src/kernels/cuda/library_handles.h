#pragma once
// Owning cuBLAS and cuDNN handles, each bound to one stream for its whole life: movable,
// not copyable, destructors that log instead of throwing.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <utility>

namespace mirrored::kernels::cuda {

class CublasHandle {
 public:
  CublasHandle() = default;
  CublasHandle(int device, cudaStream_t stream);
  ~CublasHandle();
  CublasHandle(CublasHandle&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  CublasHandle& operator=(CublasHandle&& other) noexcept;
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

class CudnnHandle {
 public:
  CudnnHandle() = default;
  CudnnHandle(int device, cudaStream_t stream);
  ~CudnnHandle();
  CudnnHandle(CudnnHandle&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  CudnnHandle& operator=(CudnnHandle&& other) noexcept;
  CudnnHandle(const CudnnHandle&) = delete;
  CudnnHandle& operator=(const CudnnHandle&) = delete;
  cudnnHandle_t get() const { return handle_; }

 private:
  cudnnHandle_t handle_ = nullptr;
};

}  // namespace mirrored::kernels::cuda
