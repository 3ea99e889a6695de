#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/conv.h"
#include "mirrored/nn/transformer.h"

namespace mirrored::nn {

TransformerBlock::TransformerBlock(int64_t heads, float dropout, float projection_std)
    : projection_std_(projection_std) {
  ln1_ = std::make_unique<LayerNorm>();
  attention_ = std::make_unique<CausalSelfAttention>(heads, dropout, projection_std);
  ln2_ = std::make_unique<LayerNorm>();
  gelu_ = std::make_unique<Gelu>();
  if (dropout > 0.0f) dropout_ = std::make_unique<Dropout>(dropout);
}

TransformerBlock::~TransformerBlock() = default;

template <typename F>
void TransformerBlock::for_each_layer(F&& f) {
  // Forward order: initialisation draws from one stream in this order.
  f(static_cast<Layer&>(*ln1_));
  f(static_cast<Layer&>(*attention_));
  f(static_cast<Layer&>(*ln2_));
  f(static_cast<Layer&>(*fc_));
  f(static_cast<Layer&>(*gelu_));
  f(static_cast<Layer&>(*fc_projection_));
  if (dropout_) f(static_cast<Layer&>(*dropout_));
}

Shape TransformerBlock::build(const Shape& input, const std::string& prefix, size_t layer_index,
                              ParameterArena& arena) {
  MIRRORED_CHECK(input.size() == 2, "TransformerBlock expects samples of [T, C], got ", shape_str(input));
  const int64_t width = input[1];
  fc_ = std::make_unique<TokenLinear>(4 * width, 0.02f);
  fc_projection_ = std::make_unique<TokenLinear>(width, projection_std_);
  Shape shape = ln1_->build(input, prefix + "ln1.", layer_index, arena);
  shape = attention_->build(shape, prefix + "attn.", layer_index, arena);
  shape = ln2_->build(shape, prefix + "ln2.", layer_index, arena);
  shape = fc_->build(shape, prefix + "mlp.fc.", layer_index, arena);
  shape = gelu_->build(shape, prefix + "mlp.gelu.", layer_index, arena);
  shape = fc_projection_->build(shape, prefix + "mlp.proj.", layer_index, arena);
  if (dropout_) shape = dropout_->build(shape, prefix + "mlp.dropout.", layer_index, arena);
  MIRRORED_CHECK(shape == input, "TransformerBlock output ", shape_str(shape), " differs from its input ",
                 shape_str(input));
  return shape;
}

void TransformerBlock::bind(ParameterArena& arena) {
  for_each_layer([&](Layer& layer) { layer.bind(arena); });
}

void TransformerBlock::initialize(Rng& rng) {
  for_each_layer([&](Layer& layer) { layer.initialize(rng); });
}

void TransformerBlock::attach(const RunContext* context) {
  Layer::attach(context);
  for_each_layer([&](Layer& layer) { layer.attach(context); });
}

const Tensor& TransformerBlock::forward(const Tensor& x, Mode mode) {
  // h = x + attention(ln1(x))
  const Tensor& attended = attention_->forward(ln1_->forward(x, mode), mode);
  ensure_shape(residual_, x.shape(), DType::kF32, x.device());
  kernels::add(x, attended, residual_);
  // out = h + mlp(ln2(h))
  const Tensor* m = &fc_->forward(ln2_->forward(residual_, mode), mode);
  m = &gelu_->forward(*m, mode);
  m = &fc_projection_->forward(*m, mode);
  if (dropout_) m = &dropout_->forward(*m, mode);
  ensure_shape(output_, x.shape(), DType::kF32, x.device());
  kernels::add(residual_, *m, output_);
  return output_;
}

const Tensor& TransformerBlock::backward(const Tensor& dy, bool need_input_grad) {
  // The residual passes dy through; the MLP branch adds its input gradient to it.
  const Tensor* g = dropout_ ? &dropout_->backward(dy, true) : &dy;
  g = &fc_projection_->backward(*g, true);
  g = &gelu_->backward(*g, true);
  g = &fc_->backward(*g, true);
  g = &ln2_->backward(*g, true);
  ensure_shape(dresidual_, dy.shape(), DType::kF32, dy.device());
  kernels::add(dy, *g, dresidual_);
  g = &attention_->backward(dresidual_, true);
  g = &ln1_->backward(*g, need_input_grad);
  if (!need_input_grad) return dinput_;
  ensure_shape(dinput_, dy.shape(), DType::kF32, dy.device());
  kernels::add(dresidual_, *g, dinput_);
  return dinput_;
}

}  // namespace mirrored::nn
