#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/conv.h"
#include "mirrored/nn/transformer.h"

namespace mirrored::nn {

CausalSelfAttention::CausalSelfAttention(int64_t heads, float dropout, float projection_std)
    : heads_(heads), projection_std_(projection_std) {
  MIRRORED_CHECK(heads > 0, "CausalSelfAttention needs at least one head, got ", heads);
  if (dropout > 0.0f) dropout_ = std::make_unique<Dropout>(dropout);
}

CausalSelfAttention::~CausalSelfAttention() = default;

Shape CausalSelfAttention::build(const Shape& input, const std::string& prefix, size_t layer_index,
                                 ParameterArena& arena) {
  MIRRORED_CHECK(input.size() == 2, "CausalSelfAttention expects samples of [T, C], got ", shape_str(input));
  const int64_t width = input[1];
  tokens_ = input[0];
  width_ = width;
  MIRRORED_CHECK(width % heads_ == 0, "CausalSelfAttention: ", heads_, " heads do not divide width ", width);
  qkv_ = std::make_unique<TokenLinear>(3 * width, 0.02f);
  projection_ = std::make_unique<TokenLinear>(width, projection_std_);
  qkv_->build(input, prefix + "qkv.", layer_index, arena);
  Shape shape = projection_->build(input, prefix + "proj.", layer_index, arena);
  if (dropout_) shape = dropout_->build(shape, prefix + "dropout.", layer_index, arena);
  return shape;
}

std::vector<LayerPart> CausalSelfAttention::parts(int64_t batch) const {
  // q k^T and p v over the causal half only: T (T + 1) / 2 query-key pairs per sample and
  // head (the fused kernel skips the blocks above the diagonal).
  const double pairs = static_cast<double>(batch) * static_cast<double>(tokens_ * (tokens_ + 1) / 2);
  std::vector<LayerPart> out = {{"attn.qkv", qkv_->forward_flops(batch)},
                                {"attn.core", 4.0 * pairs * static_cast<double>(width_)},
                                {"attn.proj", projection_->forward_flops(batch)}};
  if (dropout_) out.push_back({"attn.dropout", 0.0});
  return out;
}

void CausalSelfAttention::bind(ParameterArena& arena) {
  qkv_->bind(arena);
  projection_->bind(arena);
}

void CausalSelfAttention::initialize(Rng& rng) {
  qkv_->initialize(rng);
  projection_->initialize(rng);
}

void CausalSelfAttention::attach(const RunContext* context) {
  Layer::attach(context);
  qkv_->attach(context);
  projection_->attach(context);
  if (dropout_) dropout_->attach(context);
}

const Tensor& CausalSelfAttention::forward(const Tensor& x, Mode mode) {
  MIRRORED_CHECK(x.rank() == 3, "CausalSelfAttention expects [B, T, C], got ", shape_str(x.shape()));
  const int64_t b = x.dim(0), t = x.dim(1), c = x.dim(2);
  const Tensor& qkv = timed_part(part_timer_, "attn.qkv", [&]() -> const Tensor& { return qkv_->forward(x, mode); });
  ensure_shape(attended_, {b, t, c}, DType::kF32, x.device());
  ensure_shape(lse_, {b, heads_, t}, DType::kF32, x.device());
  timed_part(part_timer_, "attn.core", [&] { kernels::fused_attention_forward(qkv, heads_, attended_, lse_); });
  const Tensor& y =
      timed_part(part_timer_, "attn.proj", [&]() -> const Tensor& { return projection_->forward(attended_, mode); });
  if (!dropout_) return y;
  return timed_part(part_timer_, "attn.dropout", [&]() -> const Tensor& { return dropout_->forward(y, mode); });
}

const Tensor& CausalSelfAttention::backward(const Tensor& dy, bool need_input_grad) {
  const Tensor& dprojected =
      dropout_ ? timed_part(part_timer_, "attn.dropout", [&]() -> const Tensor& { return dropout_->backward(dy, true); })
               : dy;
  const Tensor& dattended = timed_part(part_timer_, "attn.proj",
                                       [&]() -> const Tensor& { return projection_->backward(dprojected, true); });
  // qkv_'s output and attended_ are still the last forward's (nothing ran them since).
  const Tensor& qkv = qkv_->forward_output();
  ensure_shape(dqkv_, qkv.shape(), DType::kF32, dy.device());
  timed_part(part_timer_, "attn.core",
             [&] { kernels::fused_attention_backward(qkv, attended_, lse_, dattended, heads_, dqkv_, workspace_); });
  return timed_part(part_timer_, "attn.qkv",
                    [&]() -> const Tensor& { return qkv_->backward(dqkv_, need_input_grad); });
}

}  // namespace mirrored::nn
