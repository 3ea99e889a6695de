#include <cmath>

#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/layers.h"

namespace mirrored::nn {

Linear::Linear(int64_t out_features, bool bias) : out_(out_features), has_bias_(bias) {
  MIRRORED_CHECK(out_features > 0, "Linear needs a positive width, got ", out_features);
}

Shape Linear::build(const Shape& input, const std::string& prefix, size_t layer_index,
                    ParameterArena& arena) {
  input_sample_shape_ = input;
  in_ = shape_numel(input);
  MIRRORED_CHECK(in_ > 0, "Linear input ", shape_str(input), " is empty");
  weight_index_ = arena.declare(prefix + "weight", {out_, in_}, layer_index);
  if (has_bias_) bias_index_ = arena.declare(prefix + "bias", {out_}, layer_index);
  return {out_};
}

void Linear::bind(ParameterArena& arena) {
  weight_ = arena.param(weight_index_);
  dweight_ = arena.grad(weight_index_);
  if (has_bias_) {
    bias_ = arena.param(bias_index_);
    dbias_ = arena.grad(bias_index_);
  }
}

void Linear::initialize(Rng& rng) {
  // nn.Linear.reset_parameters: kaiming_uniform_(a=sqrt(5)) gives
  // bound = gain * sqrt(3 / fan_in) with gain = sqrt(2 / (1 + 5)), i.e. 1 / sqrt(fan_in);
  // the bias uses the same bound.
  const float bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(in_)));
  float* w = weight_.data<float>();
  for (int64_t i = 0; i < weight_.numel(); ++i) w[i] = rng.uniform(-bound, bound);
  if (has_bias_) {
    float* b = bias_.data<float>();
    for (int64_t i = 0; i < bias_.numel(); ++i) b[i] = rng.uniform(-bound, bound);
  }
}

const Tensor& Linear::forward(const Tensor& x, Mode /*mode*/) {
  MIRRORED_CHECK(x.rank() >= 1 && x.numel() == x.dim(0) * in_, "Linear expects [batch, ",
                 shape_str(input_sample_shape_), "], got ", shape_str(x.shape()));
  const int64_t batch = x.dim(0);
  input_ = x.reshape({batch, in_});
  ensure_shape(output_, {batch, out_}, DType::kF32, x.device());
  // y = x W^T (+ b): W is [out, in], so b = W is read transposed.
  kernels::gemm(false, true, 1.0f, input_, weight_, 0.0f, output_, precision());
  if (has_bias_) kernels::add_bias(output_, bias_);
  return output_;
}

const Tensor& Linear::backward(const Tensor& dy, bool need_input_grad) {
  const int64_t batch = input_.dim(0);
  MIRRORED_CHECK(dy.shape() == Shape({batch, out_}), "Linear backward: dy ", shape_str(dy.shape()),
                 " for output [", batch, ", ", out_, "]");
  kernels::gemm(true, false, 1.0f, dy, input_, 1.0f, dweight_, precision());  // dW += dy^T x
  if (has_bias_) kernels::accumulate_bias_grad(dy, dbias_);
  if (need_input_grad) {
    // dx = dy W, shaped like the input the layer was given.
    Shape input_shape = input_sample_shape_;
    input_shape.insert(input_shape.begin(), batch);
    ensure_shape(dinput_, input_shape, DType::kF32, dy.device());
    Tensor dx_flat = dinput_.reshape({batch, in_});
    kernels::gemm(false, false, 1.0f, dy, weight_, 0.0f, dx_flat, precision());
  }
  return dinput_;
}

}  // namespace mirrored::nn
