// The per-device kernel context and the registry through which kernels find the live one.
#include <array>
#include <vector>

#include "cuda_kernels.h"
#include "cudnn_ops.h"
#include "mirrored/core/cuda_check.h"
#include "mirrored/core/error.h"

namespace mirrored::kernels::cuda {
namespace {

// The live contexts of each device, innermost last. Holds no objects of its own: it is
// empty whenever no context is alive, so nothing outlives the CUDA runtime.
constexpr int kMaxDevices = 64;
std::mutex registry_mutex;
std::array<std::vector<Context*>, kMaxDevices> registry;

size_t device_slot(int device) {
  MIRRORED_CHECK(device >= 0 && device < kMaxDevices, "CUDA device index ", device);
  return static_cast<size_t>(device);
}

void enter(Context* ctx) {
  std::lock_guard lock(registry_mutex);
  auto& stack = registry[device_slot(ctx->device)];
  // Work already queued on the context being shadowed is not ordered with the new
  // stream: let it finish first.
  if (!stack.empty()) MIRRORED_CUDA_CHECK(cudaStreamSynchronize(stack.back()->stream()));
  stack.push_back(ctx);
}

void leave(Context* ctx) noexcept {
  std::lock_guard lock(registry_mutex);
  auto& stack = registry[static_cast<size_t>(ctx->device)];
  for (auto it = stack.end(); it != stack.begin();) {
    if (*--it == ctx) {
      stack.erase(it);
      return;
    }
  }
}

}  // namespace

Context::Context(int device_index)
    : stream_(device_index, /*non_blocking=*/false),  // blocking: see core/cuda_resources.h
      device(device_index),
      conv_plans(std::make_unique<dnn::ConvPlanCache>()) {
  enter(this);
  register_compute_stream(device, stream_.get());
}

Context::~Context() {
  unregister_compute_stream(device, stream_.get());
  leave(this);
  // Queued kernels may still use the workspace, scratch and plans released below.
  MIRRORED_CUDA_LOG(cudaStreamSynchronize(stream_.get()));
}

cublasHandle_t Context::cublas() {
  std::call_once(cublas_once_, [this] { cublas_ = CublasHandle(device, stream_.get()); });
  return cublas_.get();
}

cudnnHandle_t Context::cudnn() {
  std::call_once(cudnn_once_, [this] { cudnn_ = CudnnHandle(device, stream_.get()); });
  return cudnn_.get();
}

void* Context::workspace_of_size(size_t bytes) {
  if (bytes == 0) return nullptr;
  if (workspace_.bytes() < bytes) {
    // The old workspace may still be in use by queued work: wait before freeing it.
    MIRRORED_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
    workspace_ = DeviceBuffer();
    workspace_ = DeviceBuffer(bytes, device);
  }
  return workspace_.data();
}

void* Context::bf16_scratch_of_size(int which, size_t bytes) {
  DeviceBuffer& buffer = bf16_scratch_[which];
  if (buffer.bytes() < bytes) {
    MIRRORED_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));  // queued work may still read it
    buffer = DeviceBuffer();
    buffer = DeviceBuffer(bytes, device);
  }
  return buffer.data();
}

void* Context::exact_grid_layout_of_size(size_t bytes) {
  if (exact_grid_layout_.bytes() < bytes) {
    MIRRORED_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));  // queued kernels may still read it
    exact_grid_layout_ = DeviceBuffer();
    exact_grid_layout_ = DeviceBuffer(bytes, device);
  }
  return exact_grid_layout_.data();
}

Context& context(int device) {
  Context* ctx = nullptr;
  {
    std::lock_guard lock(registry_mutex);
    const auto& stack = registry[device_slot(device)];
    MIRRORED_CHECK(!stack.empty(), "no kernel context for cuda:", device,
                   ": work on a GPU needs a live kernels::DeviceContext for it (runtime::Runtime creates one; "
                   "code without a Runtime creates its own)");
    ctx = stack.back();
  }
  set_cuda_device(device);
  return *ctx;
}

}  // namespace mirrored::kernels::cuda
