#pragma once
// One GPU's kernel state, owned in one place: the compute stream, the cuBLAS and cuDNN
// handles bound to it, the cuDNN convolution plans and their workspace, and the scratch
// areas of the reductions. runtime::Runtime creates the context of its GPU right after
// cudaSetDevice and destroys it after the NCCL communicator that uses its stream, before
// MPI goes. Code that runs kernels without a Runtime (unit tests) creates its own.
//
// While alive, a context is registered as its device's: kernels and compute_stream()
// (core/cuda_resources.h) find it there; without one, work on that device fails with a
// clear error. Contexts of one device nest: the newest is in force until it is destroyed.
// Destroy them in reverse order of creation, on the thread that created them.
#include <memory>

namespace mirrored::kernels {

namespace cuda {
class Context;
}

class DeviceContext {
 public:
  // Makes `device` current on the calling thread, creates the stream (the library handles
  // follow on first use) and registers the context. Throws in a build without CUDA.
  explicit DeviceContext(int device);
  // Waits for the work queued on the stream, unregisters, then releases plans, workspace,
  // handles, scratch and, last, the stream. Never throws.
  ~DeviceContext();
  DeviceContext(DeviceContext&&) noexcept;
  DeviceContext& operator=(DeviceContext&&) noexcept;
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  int device() const;
  // Waits until everything queued on the compute stream has run.
  void synchronize() const;

 private:
  std::unique_ptr<cuda::Context> state_;
};

}  // namespace mirrored::kernels
