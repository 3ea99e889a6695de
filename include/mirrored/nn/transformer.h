#pragma once
// Layers of a GPT-style language model. Activations are [B, T, C] (batch, tokens,
// channels); the model's input is int32 token ids [B, T] (per-sample shape [T]), which
// only Embedding consumes. Token-wise layers act on the last dimension.
#include <memory>

#include "mirrored/nn/layer.h"
#include "mirrored/nn/layers.h"
#include "mirrored/nn/part_timer.h"

namespace mirrored::nn {

class Dropout;

// Token plus learned position embeddings: out[b, t] = wte[tokens[b, t]] + wpe[t], for
// int32 tokens [B, T] with T <= context. Both tables ~ normal(0, 0.02). The token table
// also serves as the output head's weight (TiedLmHead); its gradient accumulates both
// uses. Token ids get no gradient: this is a model's first layer.
class Embedding final : public Layer {
 public:
  Embedding(int64_t vocab, int64_t context, int64_t width);
  std::string kind() const override { return "embedding"; }
  Shape build(const Shape& input, const std::string& prefix, size_t layer_index, ParameterArena& arena) override;
  void bind(ParameterArena& arena) override;
  void initialize(Rng& rng) override;
  const Tensor& forward(const Tensor& tokens, Mode mode) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;

  size_t token_table_index() const { return wte_index_; }  // in the arena, after build()
  int64_t vocab() const { return vocab_; }
  int64_t width() const { return width_; }

 private:
  int64_t vocab_, context_, width_;
  size_t wte_index_ = 0, wpe_index_ = 0;
  Tensor wte_, wpe_, dwte_, dwpe_;
  Tensor tokens_, output_, no_input_grad_;
};

// logits[b, t] = x[b, t] wte^T with the embedding's token table (weight tying): no
// parameters of its own. The Embedding must be built (an earlier layer) before this one.
class TiedLmHead final : public Layer {
 public:
  explicit TiedLmHead(const Embedding& embedding) : embedding_(embedding) {}
  std::string kind() const override { return "lm_head"; }
  double forward_flops(int64_t batch) const override;
  Shape build(const Shape& input, const std::string& prefix, size_t layer_index, ParameterArena& arena) override;
  void bind(ParameterArena& arena) override;
  const Tensor& forward(const Tensor& x, Mode mode) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;

 private:
  const Embedding& embedding_;
  int64_t tokens_per_sample_ = 0;  // from build()
  Tensor wte_, dwte_;
  Tensor input_, output_, dinput_;
  ProductOperands operands_;  // input_ and wte_ as the products take them (rounded in bf16)
};

// Layer normalisation over the last dimension (eps 1e-5, PyTorch's default); gamma 1, beta 0.
class LayerNorm final : public Layer {
 public:
  explicit LayerNorm(float eps = 1e-5f) : eps_(eps) {}
  std::string kind() const override { return "layernorm"; }
  Shape build(const Shape& input, const std::string& prefix, size_t layer_index, ParameterArena& arena) override;
  void bind(ParameterArena& arena) override;
  void initialize(Rng& rng) override;
  const Tensor& forward(const Tensor& x, Mode mode) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;
  // A residual add fused in (kernels::add_layer_norm_forward): sum = a + b, written to `sum`
  // (the caller's, kept until backward), and returns layer_norm(sum): forward(a + b).
  const Tensor& forward_sum(const Tensor& a, const Tensor& b, Tensor& sum);
  // backward(dy) + dresidual (kernels::layer_norm_backward_add): the gradient where the
  // skip path's gradient dresidual meets this layer's input gradient.
  const Tensor& backward_add(const Tensor& dy, const Tensor& dresidual);

 private:
  float eps_;
  size_t gamma_index_ = 0, beta_index_ = 0;
  Tensor gamma_, beta_, dgamma_, dbeta_;
  Tensor input_, output_, mean_, rstd_, dinput_, workspace_;
};

// GPT-2's tanh-approximated GELU.
class Gelu final : public Layer {
 public:
  std::string kind() const override { return "gelu"; }
  Shape build(const Shape& input, const std::string&, size_t, ParameterArena&) override { return input; }
  const Tensor& forward(const Tensor& x, Mode mode) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;

 private:
  Tensor input_, output_, dinput_;
};

// Causal multi-head self-attention: qkv = x W_qkv^T + b (one [3C, C] projection), attention
// per head over positions <= t, then the output projection (init std `projection_std`,
// GPT-2 scales it by 1/sqrt(2 layers)) and, when dropout > 0, residual dropout.
class CausalSelfAttention final : public Layer {
 public:
  CausalSelfAttention(int64_t heads, float dropout, float projection_std);
  ~CausalSelfAttention() override;
  std::string kind() const override { return "attention"; }
  Shape build(const Shape& input, const std::string& prefix, size_t layer_index, ParameterArena& arena) override;
  void bind(ParameterArena& arena) override;
  void initialize(Rng& rng) override;
  void attach(const RunContext* context) override;
  const Tensor& forward(const Tensor& x, Mode mode) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;
  // attn.qkv, attn.core (q k^T and p v over the full T x T square: the kernel multiplies
  // the masked half too), attn.proj, and attn.dropout when there is dropout.
  std::vector<LayerPart> parts(int64_t batch) const override;
  void set_part_timer(PartTimer* timer) override { part_timer_ = timer; }

 private:
  int64_t heads_;
  float projection_std_;
  std::unique_ptr<TokenLinear> qkv_, projection_;  // created by build(), once the width is known
  std::unique_ptr<Dropout> dropout_;  // null when dropout == 0
  int64_t tokens_ = 0, width_ = 0;     // of one sample, from build()
  // attended_ and lse_ (each query row's log-sum-exp, [B, H, T]) are all the fused kernel
  // keeps for backward: no T x T probabilities.
  Tensor attended_, lse_, dqkv_, workspace_;
  PartTimer* part_timer_ = nullptr;
};

// A pre-LayerNorm GPT block: x + attention(ln1(x)), then h + mlp(ln2(h)) with
// mlp = TokenLinear(4C) -> GELU -> TokenLinear(C) [-> Dropout], the GELU inside the first
// projection (its bias and the activation in one pass each way: Dense::Activation::kGelu).
class TransformerBlock final : public Layer {
 public:
  TransformerBlock(int64_t heads, float dropout, float projection_std);
  ~TransformerBlock() override;
  std::string kind() const override { return "block"; }
  Shape build(const Shape& input, const std::string& prefix, size_t layer_index, ParameterArena& arena) override;
  void bind(ParameterArena& arena) override;
  void initialize(Rng& rng) override;
  void attach(const RunContext* context) override;
  const Tensor& forward(const Tensor& x, Mode mode) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;
  // Each sublayer (the attention's parts included) and the residual adds, in forward order.
  std::vector<LayerPart> parts(int64_t batch) const override;
  void set_part_timer(PartTimer* timer) override;

 private:
  float projection_std_;
  std::unique_ptr<LayerNorm> ln1_, ln2_;
  std::unique_ptr<CausalSelfAttention> attention_;
  std::unique_ptr<TokenLinear> fc_, fc_projection_;  // created by build(), once the width is known
  std::unique_ptr<Dropout> dropout_;  // null when dropout == 0
  Tensor residual_, output_;  // residual_: x + attention, ln2's input
  PartTimer* part_timer_ = nullptr;

  template <typename F>
  void for_each_layer(F&& f);
};

}  // namespace mirrored::nn
