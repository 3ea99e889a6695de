// Spatial batch normalisation through cuDNN (one scale and bias per channel).
#include "cudnn_check.h"
#include "cudnn_ops.h"
#include "mirrored/core/error.h"

namespace mirrored::kernels::cuda::dnn {
namespace {
constexpr cudnnBatchNormMode_t kMode = CUDNN_BATCHNORM_SPATIAL;
}

BatchNorm2d::BatchNorm2d(int device, int64_t n, int64_t c, int64_t h, int64_t w, double epsilon, double momentum)
    : device_(device), epsilon_(epsilon), momentum_(momentum) {
  MIRRORED_CHECK(epsilon >= CUDNN_BN_MIN_EPSILON, "batch norm epsilon ", epsilon, " below cuDNN's minimum ",
                 CUDNN_BN_MIN_EPSILON);
  MIRRORED_CHECK(momentum >= 0.0 && momentum <= 1.0, "batch norm momentum ", momentum, " outside [0, 1]");
  context(device);
  x_desc_ = TensorDesc(n, c, h, w);
  param_desc_ = TensorDesc(1, c, 1, 1);
}

void BatchNorm2d::forward_training(const float* x, const float* scale, const float* bias, float* y,
                                   float* running_mean, float* running_var, float* save_mean,
                                   float* save_inv_std) const {
  const float one = 1.0f, zero = 0.0f;
  // cuDNN's exponentialAverageFactor is PyTorch's momentum: running = (1-f) running + f batch.
  MIRRORED_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
      context(device_).cudnn(), kMode, &one, &zero, x_desc_.get(), x, x_desc_.get(), y, param_desc_.get(),
      scale, bias, momentum_, running_mean, running_var, epsilon_, save_mean, save_inv_std));
}

void BatchNorm2d::forward_inference(const float* x, const float* scale, const float* bias, const float* running_mean,
                                    const float* running_var, float* y) const {
  const float one = 1.0f, zero = 0.0f;
  MIRRORED_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(context(device_).cudnn(), kMode, &one, &zero,
                                                               x_desc_.get(), x, x_desc_.get(), y, param_desc_.get(),
                                                               scale, bias, running_mean, running_var, epsilon_));
}

void BatchNorm2d::backward(const float* x, const float* dy, const float* scale, const float* save_mean,
                           const float* save_inv_std, float* dx, float* dscale, float* dbias) const {
  const float one = 1.0f, zero = 0.0f;
  // alpha/beta for data: overwrite dx; for parameters: accumulate (beta = 1).
  MIRRORED_CUDNN_CHECK(cudnnBatchNormalizationBackward(context(device_).cudnn(), kMode, &one, &zero, &one,
                                                       &one, x_desc_.get(), x, x_desc_.get(), dy, x_desc_.get(), dx,
                                                       param_desc_.get(), scale, dscale, dbias, epsilon_, save_mean,
                                                       save_inv_std));
}

}  // namespace mirrored::kernels::cuda::dnn
