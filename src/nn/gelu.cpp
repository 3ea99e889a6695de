#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/transformer.h"

namespace mirrored::nn {

const Tensor& Gelu::forward(const Tensor& x, Mode /*mode*/) {
  input_ = x;
  ensure_shape(output_, x.shape(), DType::kF32, x.device());
  kernels::gelu_forward(x, output_);
  return output_;
}

const Tensor& Gelu::backward(const Tensor& dy, bool need_input_grad) {
  if (!need_input_grad) return dinput_;
  ensure_shape(dinput_, dy.shape(), DType::kF32, dy.device());
  kernels::gelu_backward(input_, dy, dinput_);
  return dinput_;
}

}  // namespace mirrored::nn
