#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/transformer.h"

namespace mirrored::nn {

Shape LayerNorm::build(const Shape& input, const std::string& prefix, size_t layer_index, ParameterArena& arena) {
  MIRRORED_CHECK(!input.empty() && input.back() > 0, "LayerNorm input ", shape_str(input), " has no features");
  gamma_index_ = arena.declare(prefix + "weight", {input.back()}, layer_index);
  beta_index_ = arena.declare(prefix + "bias", {input.back()}, layer_index);
  return input;
}

void LayerNorm::bind(ParameterArena& arena) {
  gamma_ = arena.param(gamma_index_);
  dgamma_ = arena.grad(gamma_index_);
  beta_ = arena.param(beta_index_);
  dbeta_ = arena.grad(beta_index_);
}

void LayerNorm::initialize(Rng& /*rng*/) {
  float* g = gamma_.data<float>();
  for (int64_t i = 0; i < gamma_.numel(); ++i) g[i] = 1.0f;
  beta_.zero();
}

const Tensor& LayerNorm::forward(const Tensor& x, Mode /*mode*/) {
  MIRRORED_CHECK(x.rank() >= 2 && x.shape().back() == gamma_.numel(), "LayerNorm expects [..., ", gamma_.numel(),
                 "], got ", shape_str(x.shape()));
  input_ = x;
  const int64_t rows = x.numel() / gamma_.numel();
  ensure_shape(output_, x.shape(), DType::kF32, x.device());
  ensure_shape(mean_, {rows}, DType::kF32, x.device());
  ensure_shape(rstd_, {rows}, DType::kF32, x.device());
  kernels::layer_norm_forward(x, gamma_, beta_, eps_, output_, mean_, rstd_);
  return output_;
}

const Tensor& LayerNorm::forward_sum(const Tensor& a, const Tensor& b, Tensor& sum) {
  MIRRORED_CHECK(a.rank() >= 2 && a.shape().back() == gamma_.numel(), "LayerNorm expects [..., ", gamma_.numel(),
                 "], got ", shape_str(a.shape()));
  const int64_t rows = a.numel() / gamma_.numel();
  ensure_shape(sum, a.shape(), DType::kF32, a.device());
  ensure_shape(output_, a.shape(), DType::kF32, a.device());
  ensure_shape(mean_, {rows}, DType::kF32, a.device());
  ensure_shape(rstd_, {rows}, DType::kF32, a.device());
  kernels::add_layer_norm_forward(a, b, gamma_, beta_, eps_, sum, output_, mean_, rstd_);
  input_ = sum;
  return output_;
}

const Tensor& LayerNorm::backward_add(const Tensor& dy, const Tensor& dresidual) {
  ensure_shape(dinput_, dy.shape(), DType::kF32, dy.device());
  kernels::layer_norm_backward_add(input_, dy, gamma_, mean_, rstd_, dresidual, dinput_, dgamma_, dbeta_, workspace_);
  return dinput_;
}

const Tensor& LayerNorm::backward(const Tensor& dy, bool /*need_input_grad*/) {
  // dx comes with the parameter gradients in one pass over the rows, wanted or not.
  ensure_shape(dinput_, dy.shape(), DType::kF32, dy.device());
  kernels::layer_norm_backward(input_, dy, gamma_, mean_, rstd_, dinput_, dgamma_, dbeta_, workspace_);
  return dinput_;
}

}  // namespace mirrored::nn
