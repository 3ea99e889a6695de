// The owning handle of a device's kernel context (kernels/cuda/context.cpp holds the state).
#include "mirrored/kernels/device_context.h"

#include "mirrored/core/error.h"

#ifdef MIRRORED_WITH_CUDA
#include "cuda/cuda_kernels.h"
#include "mirrored/core/cuda_check.h"
#else
namespace mirrored::kernels::cuda {
class Context {};  // never created without CUDA; complete so that unique_ptr can name it
}  // namespace mirrored::kernels::cuda
#endif

namespace mirrored::kernels {

#ifdef MIRRORED_WITH_CUDA
DeviceContext::DeviceContext(int device) : state_(std::make_unique<cuda::Context>(device)) {}
int DeviceContext::device() const { return state_ ? state_->device : -1; }
void DeviceContext::synchronize() const {
  if (state_) MIRRORED_CUDA_CHECK(cudaStreamSynchronize(state_->stream()));
}
#else
DeviceContext::DeviceContext(int device) {
  throw Error(ExitCode::kUsage,
              str_cat("a context for cuda:", device, " needs CUDA, and this build of mirrored has no CUDA support"),
              true);
}
int DeviceContext::device() const { return -1; }
void DeviceContext::synchronize() const {}
#endif

DeviceContext::~DeviceContext() = default;
DeviceContext::DeviceContext(DeviceContext&&) noexcept = default;
DeviceContext& DeviceContext::operator=(DeviceContext&&) noexcept = default;

}  // namespace mirrored::kernels
