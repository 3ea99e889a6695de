#pragma once
// The dense layers.
#include "mirrored/nn/layer.h"

namespace mirrored::nn {

// y = x W^T + b with W [out, in] (PyTorch layout); inputs of any per-sample shape are
// flattened. Kaiming-uniform init as PyTorch's nn.Linear.
class Linear final : public Layer {
 public:
  Linear(int64_t out_features, bool bias = true);
  std::string kind() const override { return "linear"; }
  Shape build(const Shape& input, const std::string& prefix, size_t layer_index,
              ParameterArena& arena) override;
  void bind(ParameterArena& arena) override;
  void initialize(Rng& rng) override;
  const Tensor& forward(const Tensor& x, Mode mode) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;

 private:
  int64_t in_ = 0, out_;
  bool has_bias_;
  size_t weight_index_ = 0, bias_index_ = 0;
  Tensor weight_, bias_, dweight_, dbias_;
  Tensor input_;  // the last forward's input, flattened to [N, in] (a view)
  Tensor output_, dinput_;
  Shape input_sample_shape_;
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
