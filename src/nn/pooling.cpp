#include <algorithm>

#include "mirrored/nn/conv.h"

namespace mirrored::nn {
MaxPool2d::MaxPool2d(int64_t kernel, int64_t stride, int64_t padding)
    : params_{kernel, kernel, stride > 0 ? stride : kernel, padding} {
  MIRRORED_CHECK(kernel > 0 && stride >= 0 && padding >= 0 && 2 * padding <= kernel, "MaxPool2d(", kernel, ", ",
                 stride, ", ", padding, ")");
}

Shape MaxPool2d::build(const Shape& input, const std::string&, size_t, ParameterArena&) {
  MIRRORED_CHECK(input.size() == 3, "MaxPool2d expects [C, H, W] samples, got ", shape_str(input));
  const int64_t oh = kernels::conv_output_size(input[1], params_.kernel_h, params_.stride, params_.padding);
  const int64_t ow = kernels::conv_output_size(input[2], params_.kernel_w, params_.stride, params_.padding);
  MIRRORED_CHECK(oh > 0 && ow > 0, "MaxPool2d window ", params_.kernel_h, " does not fit ", shape_str(input));
  return {input[0], oh, ow};
}

const Tensor& MaxPool2d::forward(const Tensor& x, Mode /*mode*/) {
  MIRRORED_CHECK(x.rank() == 4, "MaxPool2d expects [N, C, H, W], got ", shape_str(x.shape()));
  input_shape_ = x.shape();
  const Shape out = {x.dim(0), x.dim(1),
                     kernels::conv_output_size(x.dim(2), params_.kernel_h, params_.stride, params_.padding),
                     kernels::conv_output_size(x.dim(3), params_.kernel_w, params_.stride, params_.padding)};
  ensure_shape(output_, out, DType::kF32, x.device());
  ensure_shape(argmax_, out, DType::kI32, x.device());
  kernels::max_pool2d_forward(x, params_, output_, argmax_);
  return output_;
}

const Tensor& MaxPool2d::backward(const Tensor& dy, bool need_input_grad) {
  if (!need_input_grad) return dinput_;
  ensure_shape(dinput_, input_shape_, DType::kF32, dy.device());
  kernels::max_pool2d_backward(dy, argmax_, params_, dinput_);
  return dinput_;
}

AvgPool2d::AvgPool2d(int64_t kernel, int64_t stride, int64_t padding)
    : params_{kernel, kernel, stride > 0 ? stride : std::max<int64_t>(kernel, 1), padding}, global_(kernel == 0) {
  MIRRORED_CHECK(kernel >= 0 && stride >= 0 && padding >= 0 && 2 * padding <= std::max<int64_t>(kernel, 1),
                 "AvgPool2d(", kernel, ", ", stride, ", ", padding, ")");
}

Shape AvgPool2d::build(const Shape& input, const std::string&, size_t, ParameterArena&) {
  MIRRORED_CHECK(input.size() == 3, "AvgPool2d expects [C, H, W] samples, got ", shape_str(input));
  if (global_) params_ = {input[1], input[2], 1, 0};
  const int64_t oh = kernels::conv_output_size(input[1], params_.kernel_h, params_.stride, params_.padding);
  const int64_t ow = kernels::conv_output_size(input[2], params_.kernel_w, params_.stride, params_.padding);
  MIRRORED_CHECK(oh > 0 && ow > 0, "AvgPool2d window ", params_.kernel_h, " does not fit ", shape_str(input));
  return {input[0], oh, ow};
}

const Tensor& AvgPool2d::forward(const Tensor& x, Mode /*mode*/) {
  MIRRORED_CHECK(x.rank() == 4, "AvgPool2d expects [N, C, H, W], got ", shape_str(x.shape()));
  input_shape_ = x.shape();
  const int64_t oh = kernels::conv_output_size(x.dim(2), params_.kernel_h, params_.stride, params_.padding);
  const int64_t ow = kernels::conv_output_size(x.dim(3), params_.kernel_w, params_.stride, params_.padding);
  ensure_shape(output_, {x.dim(0), x.dim(1), oh, ow}, DType::kF32, x.device());
  kernels::avg_pool2d_forward(x, params_, output_);
  return output_;
}

const Tensor& AvgPool2d::backward(const Tensor& dy, bool need_input_grad) {
  if (!need_input_grad) return dinput_;
  ensure_shape(dinput_, input_shape_, DType::kF32, dy.device());
  kernels::avg_pool2d_backward(dy, params_, dinput_);
  return dinput_;
}

Shape Flatten::build(const Shape& input, const std::string&, size_t, ParameterArena&) {
  return {shape_numel(input)};
}

const Tensor& Flatten::forward(const Tensor& x, Mode /*mode*/) {
  MIRRORED_CHECK(x.rank() >= 1, "Flatten of a scalar");
  input_shape_ = x.shape();
  output_ = x.reshape({x.dim(0), x.dim(0) > 0 ? x.numel() / x.dim(0) : 0});
  return output_;
}

const Tensor& Flatten::backward(const Tensor& dy, bool need_input_grad) {
  if (need_input_grad) dinput_ = dy.reshape(input_shape_);
  return dinput_;
}

}  // namespace mirrored::nn
