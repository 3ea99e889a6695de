#include "mirrored/nn/conv.h"

#include <cmath>

namespace mirrored::nn {

Conv2d::Conv2d(int64_t out_channels, int64_t kernel, int64_t stride, int64_t padding, bool bias)
    : out_channels_(out_channels), params_{kernel, kernel, stride, padding}, has_bias_(bias) {
  MIRRORED_CHECK(out_channels > 0 && kernel > 0 && stride > 0 && padding >= 0, "Conv2d(", out_channels, ", kernel ",
                 kernel, ", stride ", stride, ", padding ", padding, ")");
}

Shape Conv2d::build(const Shape& input, const std::string& prefix, size_t layer_index, ParameterArena& arena) {
  MIRRORED_CHECK(input.size() == 3, "Conv2d expects [C, H, W] samples, got ", shape_str(input));
  const int64_t oh = kernels::conv_output_size(input[1], params_.kernel_h, params_.stride, params_.padding);
  const int64_t ow = kernels::conv_output_size(input[2], params_.kernel_w, params_.stride, params_.padding);
  MIRRORED_CHECK(oh > 0 && ow > 0, "Conv2d kernel ", params_.kernel_h, " does not fit input ", shape_str(input),
                 " with padding ", params_.padding);
  fan_in_ = input[0] * params_.kernel_h * params_.kernel_w;
  flops_per_sample_ = 2.0 * static_cast<double>(out_channels_ * oh * ow) * static_cast<double>(fan_in_);
  weight_index_ = arena.declare(prefix + "weight", {out_channels_, input[0], params_.kernel_h, params_.kernel_w},
                                layer_index);
  if (has_bias_) bias_index_ = arena.declare(prefix + "bias", {out_channels_}, layer_index);
  return {out_channels_, oh, ow};
}

void Conv2d::bind(ParameterArena& arena) {
  weight_ = arena.param(weight_index_);
  dweight_ = arena.grad(weight_index_);
  if (has_bias_) {
    bias_ = arena.param(bias_index_);
    dbias_ = arena.grad(bias_index_);
  }
}

void Conv2d::initialize(Rng& rng) {
  const float bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(fan_in_)));
  float* w = weight_.data<float>();
  for (int64_t i = 0; i < weight_.numel(); ++i) w[i] = rng.uniform(-bound, bound);
  if (has_bias_) {
    float* b = bias_.data<float>();
    for (int64_t i = 0; i < bias_.numel(); ++i) b[i] = rng.uniform(-bound, bound);
  }
}

const Tensor& Conv2d::forward(const Tensor& x, Mode /*mode*/) {
  MIRRORED_CHECK(x.rank() == 4 && x.dim(1) == weight_.dim(1), "Conv2d expects [N, ", weight_.dim(1),
                 ", H, W], got ", shape_str(x.shape()));
  input_ = x;
  const int64_t oh = kernels::conv_output_size(x.dim(2), params_.kernel_h, params_.stride, params_.padding);
  const int64_t ow = kernels::conv_output_size(x.dim(3), params_.kernel_w, params_.stride, params_.padding);
  ensure_shape(output_, {x.dim(0), out_channels_, oh, ow}, DType::kF32, x.device());
  kernels::conv2d_forward(x, weight_, has_bias_ ? &bias_ : nullptr, params_, output_, workspace_, precision());
  return output_;
}

const Tensor& Conv2d::backward(const Tensor& dy, bool need_input_grad) {
  if (need_input_grad) ensure_shape(dinput_, input_.shape(), DType::kF32, dy.device());
  kernels::conv2d_backward(input_, weight_, dy, params_, need_input_grad ? &dinput_ : nullptr, dweight_,
                           has_bias_ ? &dbias_ : nullptr, workspace_, precision());
  return dinput_;
}

}  // namespace mirrored::nn
