#include <cmath>

#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/layers.h"

namespace mirrored::nn {

Dense::Dense(int64_t out_features, Options options) : options_(options), out_(out_features) {
  MIRRORED_CHECK(out_features > 0, "Dense needs a positive width, got ", out_features);
  MIRRORED_CHECK(options.bias || options.activation == Activation::kNone, "Dense with GELU needs a bias");
  MIRRORED_CHECK(!options.feeds_products_only || options.activation == Activation::kGelu,
                 "Dense: an output in bfloat16 for the next products is made with GELU only");
}

Shape Dense::build(const Shape& input, const std::string& prefix, size_t layer_index, ParameterArena& arena) {
  input_sample_shape_ = input;
  if (options_.over == Over::kSample) {
    in_ = shape_numel(input);
    MIRRORED_CHECK(in_ > 0, "Dense input ", shape_str(input), " is empty");
    rows_per_sample_ = 1;
  } else {
    MIRRORED_CHECK(!input.empty() && input.back() > 0, "Dense input ", shape_str(input), " has no features");
    in_ = input.back();
    rows_per_sample_ = shape_numel(input) / in_;
  }
  weight_index_ = arena.declare(prefix + "weight", {out_, in_}, layer_index);
  if (options_.bias) bias_index_ = arena.declare(prefix + "bias", {out_}, layer_index);
  if (options_.over == Over::kSample) return {out_};
  Shape output = input;
  output.back() = out_;
  return output;
}

void Dense::bind(ParameterArena& arena) {
  weight_ = arena.param(weight_index_);
  dweight_ = arena.grad(weight_index_);
  if (options_.bias) {
    bias_ = arena.param(bias_index_);
    dbias_ = arena.grad(bias_index_);
  }
}

void Dense::initialize(Rng& rng) {
  float* w = weight_.data<float>();
  if (options_.init_std > 0.0f) {  // GPT-2
    for (int64_t i = 0; i < weight_.numel(); ++i) w[i] = options_.init_std * rng.normal();
    if (options_.bias) bias_.zero();
    return;
  }
  // nn.Linear.reset_parameters: kaiming_uniform_(a=sqrt(5)) gives
  // bound = gain * sqrt(3 / fan_in) with gain = sqrt(2 / (1 + 5)), i.e. 1 / sqrt(fan_in);
  // the bias uses the same bound.
  const float bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(in_)));
  for (int64_t i = 0; i < weight_.numel(); ++i) w[i] = rng.uniform(-bound, bound);
  if (options_.bias) {
    float* b = bias_.data<float>();
    for (int64_t i = 0; i < bias_.numel(); ++i) b[i] = rng.uniform(-bound, bound);
  }
}

const Tensor& Dense::forward(const Tensor& x, Mode /*mode*/) {
  Shape output_shape;
  if (options_.over == Over::kSample) {
    MIRRORED_CHECK(x.rank() >= 1 && x.numel() == x.dim(0) * in_, "Dense expects [batch, ",
                   shape_str(input_sample_shape_), "], got ", shape_str(x.shape()));
    output_shape = {x.dim(0), out_};
  } else {
    MIRRORED_CHECK(x.rank() >= 2 && x.shape().back() == in_, "Dense expects [..., ", in_, "], got ",
                   shape_str(x.shape()));
    output_shape = x.shape();
    output_shape.back() = out_;
  }
  input_shape_ = x.shape();
  const int64_t rows = x.numel() / in_;
  input_ = x.reshape({rows, in_});
  operands_.forward(input_, weight_, precision());
  const bool rounded_output = options_.feeds_products_only && operands_.rounded();
  ensure_shape(output_, output_shape, rounded_output ? DType::kBF16 : DType::kF32, x.device());
  Tensor y = output_.reshape({rows, out_});
  // y = x W^T (+ b): W is [out, in], so it is read transposed.
  if (options_.activation == Activation::kGelu) {
    ensure_shape(preactivation_, {rows, out_}, DType::kF32, x.device());
    ensure_shape(gelu_tanh_, {rows, out_}, DType::kF32, x.device());
    kernels::gemm(false, true, 1.0f, operands_.x(input_), operands_.weight(weight_), 0.0f, preactivation_,
                  precision());
    kernels::bias_gelu_forward(preactivation_, bias_, gelu_tanh_, y);
    return output_;
  }
  kernels::gemm(false, true, 1.0f, operands_.x(input_), operands_.weight(weight_), 0.0f, y, precision());
  if (options_.bias) kernels::add_bias(y, bias_);
  return output_;
}

const Tensor& Dense::ones_column(int64_t rows, Device device) {
  if (!ones_.defined() || ones_.dim(0) != rows || ones_.device() != device) {
    // Filled on the host and copied once per new row count, not per step.
    Tensor host({rows, 1});
    float* one = host.data<float>();
    for (int64_t i = 0; i < rows; ++i) one[i] = 1.0f;
    ones_ = Tensor({rows, 1}, DType::kF32, device);
    kernels::copy(host, ones_);
  }
  return ones_;
}

const Tensor& Dense::backward(const Tensor& dy, bool need_input_grad) {
  const int64_t rows = input_.dim(0);
  MIRRORED_CHECK(dy.shape() == output_.shape(), "Dense backward: dy ", shape_str(dy.shape()), " for output ",
                 shape_str(output_.shape()));
  Tensor dy_rows = dy.reshape({rows, out_});
  const bool bias_done = options_.activation == Activation::kGelu;
  if (bias_done) {
    // From here on dy is the gradient at x W^T + b; its column sums went into dbias. With
    // bfloat16 products it is rounded as it is formed: they read it only rounded.
    ensure_shape(dpreactivation_, {rows, out_}, operands_.rounded() ? DType::kBF16 : DType::kF32, dy.device());
    kernels::bias_gelu_backward(preactivation_, gelu_tanh_, dy_rows, dpreactivation_, dbias_);
    dy_rows = dpreactivation_;
  }
  const Tensor& dy_operand = operands_.dy(dy_rows);
  kernels::gemm(true, false, 1.0f, dy_operand, operands_.x(input_), 1.0f, dweight_, precision());  // dW += dy^T x
  if (options_.bias && !bias_done) {
    // dbias += dy^T 1 as a matrix product: on a GPU, cuBLAS spreads the rows (B, or B * T
    // tokens) over the whole device, where a column-per-thread bias kernel would walk them
    // one by one. A sum, not a product of activations and weights: float32 in either precision.
    const Tensor& ones = ones_column(rows, dy.device());
    Tensor dbias_column = dbias_.reshape({out_, 1});
    kernels::gemm(true, false, 1.0f, dy_rows, ones, 1.0f, dbias_column);
  }
  if (need_input_grad) {
    // dx = dy W, shaped like the input the layer was given.
    ensure_shape(dinput_, input_shape_, DType::kF32, dy.device());
    Tensor dx = dinput_.reshape({rows, in_});
    kernels::gemm(false, false, 1.0f, dy_operand, operands_.weight(weight_), 0.0f, dx, precision());
  }
  return dinput_;
}

}  // namespace mirrored::nn
