#pragma once
// The dense layers: Dense (as Linear for whole samples, TokenLinear for tokens) and ReLU.
#include "mirrored/nn/layer.h"
#include "mirrored/nn/product_operands.h"

namespace mirrored::nn {

// y[..., out] = x[..., in] W^T + b with W [out, in] (PyTorch layout): the fully connected
// layers of the mlp and the cnn and the token projections of the gpt, the same matrix
// products and the same bias gradient. What a row of x is:
//   Over::kSample   each sample, flattened (the mlp reads images without a Flatten);
//   Over::kLastDim  each token's features, the other dimensions kept ([B, T, C] -> [B, T, out]).
class Dense : public Layer {
 public:
  enum class Over { kSample, kLastDim };
  // kGelu: y = gelu(x W^T + b) (GPT-2's tanh form, the mlp's first projection), the bias
  // and the activation in one pass each way (kernels::bias_gelu_forward); needs the bias.
  enum class Activation { kNone, kGelu };
  struct Options {
    Over over = Over::kSample;
    // 0: PyTorch's nn.Linear init (kaiming-uniform, bound 1/sqrt(in), the bias too);
    // > 0: W ~ normal(0, init_std), b = 0 (GPT-2).
    float init_std = 0.0f;
    bool bias = true;
    Activation activation = Activation::kNone;
    // The output feeds nothing but the next layer's matrix products (the GPT's MLP: GELU's
    // values go only to its projection). With GELU and bfloat16 products on the CPU it is
    // then produced in bfloat16, each value rounded as it is formed, which those products
    // take as it is: the bits of rounding it there, without the float32 copy in memory.
    bool feeds_products_only = false;
  };
  Dense(int64_t out_features, Options options);
  // Parameter names of a model's own dense layer follow it ("0.linear.weight").
  std::string kind() const override { return options_.over == Over::kSample ? "linear" : "token_linear"; }
  Shape build(const Shape& input, const std::string& prefix, size_t layer_index, ParameterArena& arena) override;
  void bind(ParameterArena& arena) override;
  void initialize(Rng& rng) override;
  const Tensor& forward(const Tensor& x, Mode mode) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;
  double forward_flops(int64_t batch) const override {
    return 2.0 * static_cast<double>(batch * rows_per_sample_) * static_cast<double>(in_) * static_cast<double>(out_);
  }
  const Tensor& forward_output() const { return output_; }  // the last forward's

 private:
  Options options_;
  int64_t in_ = 0, out_, rows_per_sample_ = 1;
  Shape input_sample_shape_;
  size_t weight_index_ = 0, bias_index_ = 0;
  Tensor weight_, bias_, dweight_, dbias_;
  Tensor input_;  // the last forward's input as [rows, in] (a view)
  ProductOperands operands_;  // input_ and weight_ as the products take them (rounded in bf16)
  Shape input_shape_;
  Tensor output_, dinput_;
  Tensor ones_;  // [rows, 1] of ones: the bias gradient as a matrix product
  // With an activation: x W^T + b as [rows, out], the tanh that GELU's backward reads, and
  // the gradient at x W^T + b.
  Tensor preactivation_, gelu_tanh_, dpreactivation_;

  const Tensor& ones_column(int64_t rows, Device device);
};

// PyTorch's nn.Linear on each sample, flattened.
class Linear final : public Dense {
 public:
  explicit Linear(int64_t out_features, bool bias = true) : Dense(out_features, {Over::kSample, 0.0f, bias}) {}
};

// A token-wise projection with GPT-2's init: W ~ normal(0, init_std), b = 0.
class TokenLinear final : public Dense {
 public:
  TokenLinear(int64_t out_features, float init_std, bool bias = true, Activation activation = Activation::kNone,
              bool feeds_products_only = false)
      : Dense(out_features, {Over::kLastDim, init_std, bias, activation, feeds_products_only}) {}
};

class ReLU final : public Layer {
 public:
  std::string kind() const override { return "relu"; }
  Shape build(const Shape& input, const std::string&, size_t, ParameterArena&) override { return input; }
  const Tensor& forward(const Tensor& x, Mode mode) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;

 private:
  Tensor output_, dinput_;
};

}  // namespace mirrored::nn
