// Element-wise activations through cuDNN (ReLU, sigmoid, tanh) for the conv layers; the
// dense path keeps its own fused kernels in elementwise.cu.
#include "cudnn_check.h"
#include "cudnn_ops.h"

namespace mirrored::kernels::cuda::dnn {

Activation::Activation(int device, ActivationMode mode, int64_t n, int64_t c, int64_t h, int64_t w)
    : device_(device) {
  context(device);
  desc_ = TensorDesc(n, c, h, w);
  MIRRORED_CUDNN_CHECK(cudnnCreateActivationDescriptor(&act_));
  const cudnnActivationMode_t cudnn_mode = mode == ActivationMode::kRelu      ? CUDNN_ACTIVATION_RELU
                                           : mode == ActivationMode::kSigmoid ? CUDNN_ACTIVATION_SIGMOID
                                                                              : CUDNN_ACTIVATION_TANH;
  MIRRORED_CUDNN_CHECK(cudnnSetActivationDescriptor(act_, cudnn_mode, CUDNN_NOT_PROPAGATE_NAN, 0.0));
}

Activation::~Activation() {
  if (act_) MIRRORED_CUDNN_LOG(cudnnDestroyActivationDescriptor(act_));
}

void Activation::forward(const float* x, float* y) const {
  const float one = 1.0f, zero = 0.0f;
  MIRRORED_CUDNN_CHECK(
      cudnnActivationForward(context(device_).cudnn(), act_, &one, desc_.get(), x, &zero, desc_.get(), y));
}

void Activation::backward(const float* x, const float* y, const float* dy, float* dx) const {
  const float one = 1.0f, zero = 0.0f;
  MIRRORED_CUDNN_CHECK(cudnnActivationBackward(context(device_).cudnn(), act_, &one, desc_.get(), y,
                                               desc_.get(), dy, desc_.get(), x, &zero, desc_.get(), dx));
}

}  // namespace mirrored::kernels::cuda::dnn
