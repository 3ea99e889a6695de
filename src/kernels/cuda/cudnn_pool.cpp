// 2-D max and average pooling through cuDNN.
#include "cudnn_check.h"
#include "cudnn_ops.h"
#include "mirrored/core/error.h"

namespace mirrored::kernels::cuda::dnn {

Pool2d::Pool2d(int device, PoolMode mode, int64_t n, int64_t c, int64_t h, int64_t w, int window, int stride, int pad)
    : device_(device) {
  MIRRORED_CHECK(window > 0 && stride > 0 && pad >= 0 && pad < window, "pooling window ", window, " stride ", stride,
                 " pad ", pad);
  context(device);
  x_desc_ = TensorDesc(n, c, h, w);
  MIRRORED_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&desc_));
  const cudnnPoolingMode_t cudnn_mode =
      mode == PoolMode::kMax ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  MIRRORED_CUDNN_CHECK(cudnnSetPooling2dDescriptor(desc_, cudnn_mode, CUDNN_NOT_PROPAGATE_NAN, window, window, pad, pad,
                                                   stride, stride));
  int on = 0, oc = 0, oh = 0, ow = 0;
  MIRRORED_CUDNN_CHECK(cudnnGetPooling2dForwardOutputDim(desc_, x_desc_.get(), &on, &oc, &oh, &ow));
  out_h_ = oh;
  out_w_ = ow;
  y_desc_ = TensorDesc(on, oc, oh, ow);
}

Pool2d::~Pool2d() {
  if (desc_) MIRRORED_CUDNN_LOG(cudnnDestroyPoolingDescriptor(desc_));
}

void Pool2d::forward(const float* x, float* y) const {
  const float one = 1.0f, zero = 0.0f;
  MIRRORED_CUDNN_CHECK(
      cudnnPoolingForward(context(device_).cudnn(), desc_, &one, x_desc_.get(), x, &zero, y_desc_.get(), y));
}

void Pool2d::backward(const float* x, const float* y, const float* dy, float* dx) const {
  const float one = 1.0f, zero = 0.0f;
  MIRRORED_CUDNN_CHECK(cudnnPoolingBackward(context(device_).cudnn(), desc_, &one, y_desc_.get(), y,
                                            y_desc_.get(), dy, x_desc_.get(), x, &zero, x_desc_.get(), dx));
}

}  // namespace mirrored::kernels::cuda::dnn
