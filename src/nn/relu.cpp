#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/layers.h"

namespace mirrored::nn {

const Tensor& ReLU::forward(const Tensor& x, Mode /*mode*/) {
  ensure_shape(output_, x.shape(), DType::kF32, x.device());
  kernels::relu_forward(x, output_);
  return output_;
}

const Tensor& ReLU::backward(const Tensor& dy, bool need_input_grad) {
  // No parameters: without an input gradient there is nothing to do.
  if (!need_input_grad) return dinput_;
  ensure_shape(dinput_, output_.shape(), DType::kF32, dy.device());
  kernels::relu_backward(output_, dy, dinput_);
  return dinput_;
}

}  // namespace mirrored::nn
