#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/conv.h"
#include "mirrored/nn/transformer.h"

namespace mirrored::nn {

TransformerBlock::TransformerBlock(int64_t heads, float dropout, float projection_std)
    : projection_std_(projection_std) {
  ln1_ = std::make_unique<LayerNorm>();
  attention_ = std::make_unique<CausalSelfAttention>(heads, dropout, projection_std);
  ln2_ = std::make_unique<LayerNorm>();
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
  f(static_cast<Layer&>(*fc_projection_));
  if (dropout_) f(static_cast<Layer&>(*dropout_));
}

Shape TransformerBlock::build(const Shape& input, const std::string& prefix, size_t layer_index,
                              ParameterArena& arena) {
  MIRRORED_CHECK(input.size() == 2, "TransformerBlock expects samples of [T, C], got ", shape_str(input));
  const int64_t width = input[1];
  // Its GELU values feed only the projection's products (dropout, if any, comes after it).
  fc_ = std::make_unique<TokenLinear>(4 * width, 0.02f, true, Dense::Activation::kGelu, /*feeds_products_only=*/true);
  fc_projection_ = std::make_unique<TokenLinear>(width, projection_std_);
  Shape shape = ln1_->build(input, prefix + "ln1.", layer_index, arena);
  shape = attention_->build(shape, prefix + "attn.", layer_index, arena);
  shape = ln2_->build(shape, prefix + "ln2.", layer_index, arena);
  shape = fc_->build(shape, prefix + "mlp.fc.", layer_index, arena);
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

std::vector<LayerPart> TransformerBlock::parts(int64_t batch) const {
  std::vector<LayerPart> out = {{"ln1", 0.0}};
  for (const LayerPart& part : attention_->parts(batch)) out.push_back(part);
  // The first residual add runs inside ln2 (forward) and ln2 and ln1 (backward): the parts
  // that hold it are named for both.
  out.push_back({"residual+ln2", 0.0});
  out.push_back({"mlp.fc+gelu", fc_->forward_flops(batch)});
  out.push_back({"mlp.proj", fc_projection_->forward_flops(batch)});
  if (dropout_) out.push_back({"mlp.dropout", 0.0});
  out.push_back({"residual", 0.0});
  return out;
}

void TransformerBlock::set_part_timer(PartTimer* timer) {
  part_timer_ = timer;
  attention_->set_part_timer(timer);
}

const Tensor& TransformerBlock::forward(const Tensor& x, Mode mode) {
  // Each step wrapped for `bench layers` (part_timer.h); untimed when no timer is set.
  auto part = [&](const char* name, Layer& layer, const Tensor& in) -> const Tensor& {
    return timed_part(part_timer_, name, [&]() -> const Tensor& { return layer.forward(in, mode); });
  };
  // h = x + attention(ln1(x)), added in the pass of ln2 that reads it.
  const Tensor& attended = attention_->forward(part("ln1", *ln1_, x), mode);
  const Tensor& normed = timed_part(part_timer_, "residual+ln2",
                                    [&]() -> const Tensor& { return ln2_->forward_sum(x, attended, residual_); });
  // out = h + mlp(ln2(h))
  const Tensor* m = &part("mlp.fc+gelu", *fc_, normed);
  m = &part("mlp.proj", *fc_projection_, *m);
  if (dropout_) m = &part("mlp.dropout", *dropout_, *m);
  timed_part(part_timer_, "residual", [&] {
    ensure_shape(output_, x.shape(), DType::kF32, x.device());
    kernels::add(residual_, *m, output_);
  });
  return output_;
}

const Tensor& TransformerBlock::backward(const Tensor& dy, bool /*need_input_grad*/) {
  // ln1's input gradient is formed whether wanted or not: ln1's parameter gradients come from
  // the same pass.
  auto part = [&](const char* name, Layer& layer, const Tensor& grad, bool need) -> const Tensor& {
    return timed_part(part_timer_, name, [&]() -> const Tensor& { return layer.backward(grad, need); });
  };
  // The residual passes dy through; the MLP branch adds its input gradient to it.
  const Tensor* g = dropout_ ? &part("mlp.dropout", *dropout_, dy, true) : &dy;
  g = &part("mlp.proj", *fc_projection_, *g, true);
  g = &part("mlp.fc+gelu", *fc_, *g, true);
  // dh = dy (the skip path) + ln2's input gradient, and dx = dh + ln1's, each added in the
  // layer norm's own pass.
  const Tensor& dresidual = timed_part(part_timer_, "residual+ln2",
                                       [&]() -> const Tensor& { return ln2_->backward_add(*g, dy); });
  g = &attention_->backward(dresidual, true);
  const Tensor& dinput = timed_part(part_timer_, "ln1",
                                    [&]() -> const Tensor& { return ln1_->backward_add(*g, dresidual); });
  return dinput;
}

}  // namespace mirrored::nn
