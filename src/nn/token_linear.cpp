#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/transformer.h"

namespace mirrored::nn {
namespace {
// The other dimensions of `shape` with the last replaced by `last`.
Shape with_last(Shape shape, int64_t last) {
  shape.back() = last;
  return shape;
}
}  // namespace

TokenLinear::TokenLinear(int64_t out_features, float init_std, bool bias)
    : out_(out_features), init_std_(init_std), has_bias_(bias) {
  MIRRORED_CHECK(out_features > 0, "TokenLinear needs a positive width, got ", out_features);
}

Shape TokenLinear::build(const Shape& input, const std::string& prefix, size_t layer_index, ParameterArena& arena) {
  MIRRORED_CHECK(!input.empty() && input.back() > 0, "TokenLinear input ", shape_str(input), " has no features");
  in_ = input.back();
  weight_index_ = arena.declare(prefix + "weight", {out_, in_}, layer_index);
  if (has_bias_) bias_index_ = arena.declare(prefix + "bias", {out_}, layer_index);
  return with_last(input, out_);
}

void TokenLinear::bind(ParameterArena& arena) {
  weight_ = arena.param(weight_index_);
  dweight_ = arena.grad(weight_index_);
  if (has_bias_) {
    bias_ = arena.param(bias_index_);
    dbias_ = arena.grad(bias_index_);
  }
}

void TokenLinear::initialize(Rng& rng) {
  float* w = weight_.data<float>();
  for (int64_t i = 0; i < weight_.numel(); ++i) w[i] = init_std_ * rng.normal();
  if (has_bias_) bias_.zero();
}

const Tensor& TokenLinear::forward(const Tensor& x, Mode /*mode*/) {
  MIRRORED_CHECK(x.rank() >= 2 && x.shape().back() == in_, "TokenLinear expects [..., ", in_, "], got ",
                 shape_str(x.shape()));
  const int64_t rows = x.numel() / in_;
  input_ = x.reshape({rows, in_});
  ensure_shape(output_, with_last(x.shape(), out_), DType::kF32, x.device());
  Tensor y = output_.reshape({rows, out_});
  kernels::gemm(false, true, 1.0f, input_, weight_, 0.0f, y, precision());
  if (has_bias_) kernels::add_bias(y, bias_);
  return output_;
}

const Tensor& TokenLinear::ones_column(int64_t rows, Device device) {
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

const Tensor& TokenLinear::backward(const Tensor& dy, bool need_input_grad) {
  const int64_t rows = input_.dim(0);
  MIRRORED_CHECK(dy.shape() == output_.shape(), "TokenLinear backward: dy ", shape_str(dy.shape()), " for output ",
                 shape_str(output_.shape()));
  const Tensor dy_rows = dy.reshape({rows, out_});
  kernels::gemm(true, false, 1.0f, dy_rows, input_, 1.0f, dweight_, precision());  // dW += dy^T x
  if (has_bias_) {
    // dbias += dy^T 1 as a matrix product: on a GPU, cuBLAS spreads the B * T rows over the
    // whole device, where the column-per-thread bias kernel would walk them one by one.
    // A sum, not a product of activations and weights: float32 in either precision.
    const Tensor& ones = ones_column(rows, dy.device());
    Tensor dbias_column = dbias_.reshape({out_, 1});
    kernels::gemm(true, false, 1.0f, dy_rows, ones, 1.0f, dbias_column);
  }
  if (need_input_grad) {
    ensure_shape(dinput_, with_last(dy.shape(), in_), DType::kF32, dy.device());
    Tensor dx = dinput_.reshape({rows, in_});
    kernels::gemm(false, false, 1.0f, dy_rows, weight_, 0.0f, dx, precision());  // dx = dy W
  }
  return dinput_;
}

}  // namespace mirrored::nn
