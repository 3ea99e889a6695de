// cuDNN's 4-D tensor descriptor.
#include "cudnn_check.h"
#include "cudnn_ops.h"
#include "mirrored/core/error.h"

namespace mirrored::kernels::cuda::dnn {

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

}  // namespace mirrored::kernels::cuda::dnn
