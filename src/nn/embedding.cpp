#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/transformer.h"

namespace mirrored::nn {

Embedding::Embedding(int64_t vocab, int64_t context, int64_t width)
    : vocab_(vocab), context_(context), width_(width) {
  MIRRORED_CHECK(vocab > 0 && context > 0 && width > 0, "Embedding(vocab ", vocab, ", context ", context,
                 ", width ", width, "): all must be positive");
}

Shape Embedding::build(const Shape& input, const std::string& prefix, size_t layer_index, ParameterArena& arena) {
  MIRRORED_CHECK(input.size() == 1 && input[0] > 0 && input[0] <= context_, "Embedding expects samples of [T] ",
                 "token ids with 0 < T <= context ", context_, ", got ", shape_str(input));
  wte_index_ = arena.declare(prefix + "wte", {vocab_, width_}, layer_index);
  wpe_index_ = arena.declare(prefix + "wpe", {context_, width_}, layer_index);
  return {input[0], width_};
}

void Embedding::bind(ParameterArena& arena) {
  wte_ = arena.param(wte_index_);
  dwte_ = arena.grad(wte_index_);
  wpe_ = arena.param(wpe_index_);
  dwpe_ = arena.grad(wpe_index_);
}

void Embedding::initialize(Rng& rng) {
  for (Tensor* table : {&wte_, &wpe_}) {
    float* w = table->data<float>();
    for (int64_t i = 0; i < table->numel(); ++i) w[i] = 0.02f * rng.normal();
  }
}

const Tensor& Embedding::forward(const Tensor& tokens, Mode /*mode*/) {
  MIRRORED_CHECK(tokens.rank() == 2 && tokens.dtype() == DType::kI32, "Embedding expects int32 token ids [B, T], got ",
                 dtype_name(tokens.dtype()), " ", shape_str(tokens.shape()));
  tokens_ = tokens;
  ensure_shape(output_, {tokens.dim(0), tokens.dim(1), width_}, DType::kF32, tokens.device());
  kernels::embedding_forward(tokens, wte_, wpe_, output_);
  return output_;
}

const Tensor& Embedding::backward(const Tensor& dy, bool need_input_grad) {
  MIRRORED_CHECK(!need_input_grad, "Embedding: token ids have no gradient (it must be a model's first layer)");
  kernels::embedding_backward(tokens_, dy, dwte_, dwpe_);
  return no_input_grad_;
}

Shape TiedLmHead::build(const Shape& input, const std::string& /*prefix*/, size_t /*layer_index*/,
                        ParameterArena& /*arena*/) {
  MIRRORED_CHECK(!input.empty() && input.back() == embedding_.width(), "TiedLmHead input ", shape_str(input),
                 " does not end in the embedding width ", embedding_.width());
  tokens_per_sample_ = shape_numel(input) / input.back();
  Shape out = input;
  out.back() = embedding_.vocab();
  return out;
}

// Every token's logits: [width] x [width, vocab].
double TiedLmHead::forward_flops(int64_t batch) const {
  return 2.0 * static_cast<double>(batch * tokens_per_sample_) * static_cast<double>(embedding_.width()) *
         static_cast<double>(embedding_.vocab());
}

void TiedLmHead::bind(ParameterArena& arena) {
  // The embedding's token table: one parameter in the arena, two users. It stays the
  // embedding's (its layer index), so its gradient is final only after the embedding's
  // backward, which adds to what this head added.
  wte_ = arena.param(embedding_.token_table_index());
  dwte_ = arena.grad(embedding_.token_table_index());
}

const Tensor& TiedLmHead::forward(const Tensor& x, Mode /*mode*/) {
  const int64_t width = embedding_.width(), vocab = embedding_.vocab();
  MIRRORED_CHECK(x.rank() >= 2 && x.shape().back() == width, "TiedLmHead expects [..., ", width, "], got ",
                 shape_str(x.shape()));
  const int64_t rows = x.numel() / width;
  input_ = x.reshape({rows, width});
  Shape out = x.shape();
  out.back() = vocab;
  ensure_shape(output_, out, DType::kF32, x.device());
  Tensor logits = output_.reshape({rows, vocab});
  operands_.forward(input_, wte_, precision());
  kernels::gemm(false, true, 1.0f, operands_.x(input_), operands_.weight(wte_), 0.0f, logits, precision());
  return output_;
}

const Tensor& TiedLmHead::backward(const Tensor& dy, bool need_input_grad) {
  const int64_t rows = input_.dim(0), width = embedding_.width(), vocab = embedding_.vocab();
  MIRRORED_CHECK(dy.shape() == output_.shape(), "TiedLmHead backward: dy ", shape_str(dy.shape()), " for output ",
                 shape_str(output_.shape()));
  const Tensor dlogits = dy.reshape({rows, vocab});
  const Tensor& dlogits_operand = operands_.dy(dlogits);
  // dwte += dlogits^T x
  kernels::gemm(true, false, 1.0f, dlogits_operand, operands_.x(input_), 1.0f, dwte_, precision());
  if (need_input_grad) {
    Shape in = dy.shape();
    in.back() = width;
    ensure_shape(dinput_, in, DType::kF32, dy.device());
    Tensor dx = dinput_.reshape({rows, width});
    kernels::gemm(false, false, 1.0f, dlogits_operand, operands_.weight(wte_), 0.0f, dx, precision());
  }
  return dinput_;
}

}  // namespace mirrored::nn
