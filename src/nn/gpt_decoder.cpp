#include "mirrored/nn/gpt_decoder.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "mirrored/core/error.h"
#include "mirrored/core/strings.h"
#include "mirrored/kernels/transformer_math.h"

namespace mirrored::nn {
namespace {

// y[out] = W[out, in] x + b. Eight partial sums per row, so the compiler can vectorise the
// dot products without reassociating a single sum.
void linear(const float* w, const float* b, const float* x, int64_t in, int64_t out, float* y) {
  constexpr int64_t kLanes = 8;
  const int64_t body = in - in % kLanes;
  for (int64_t o = 0; o < out; ++o) {
    const float* row = w + o * in;
    float lanes[kLanes] = {};
    for (int64_t i = 0; i < body; i += kLanes)
      for (int64_t l = 0; l < kLanes; ++l) lanes[l] += row[i + l] * x[i + l];
    float sum = 0.0f;
    for (const float lane : lanes) sum += lane;
    for (int64_t i = body; i < in; ++i) sum += row[i] * x[i];
    y[o] = sum + (b ? b[o] : 0.0f);
  }
}

// LayerNorm over n values, eps 1e-5 as nn::LayerNorm.
void layer_norm(const float* x, const float* gamma, const float* beta, int64_t n, float* y) {
  float mean = 0.0f;
  for (int64_t i = 0; i < n; ++i) mean += x[i];
  mean /= static_cast<float>(n);
  float variance = 0.0f;
  for (int64_t i = 0; i < n; ++i) variance += (x[i] - mean) * (x[i] - mean);
  variance /= static_cast<float>(n);
  const float rstd = 1.0f / std::sqrt(variance + 1e-5f);
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mean) * rstd * gamma[i] + beta[i];
}

}  // namespace

GptDecoder::GptDecoder(const ParameterArena& arena, const GptSpec& spec) : spec_(spec) {
  MIRRORED_CHECK(arena.allocated() && arena.flat_params().device().is_cpu(), "GptDecoder needs host parameters");
  // nn::gpt names its parameters "<layer>.<kind>.<path>" (builders.cpp, transformer.h).
  std::map<std::string, const float*> by_path;
  std::vector<std::map<std::string, const float*>> block_params;
  size_t block_layer = SIZE_MAX;
  for (size_t i = 0; i < arena.size(); ++i) {
    const ParameterInfo& info = arena.info(i);
    const std::vector<std::string> parts = split(info.name, '.');
    const std::string path = info.name.substr(parts[0].size() + 1);
    const float* data = arena.flat_params().data<float>() + info.offset;
    if (parts[1] == "block") {
      if (info.layer != block_layer) {
        block_layer = info.layer;
        block_params.emplace_back();
      }
      block_params.back()[path.substr(std::string("block.").size())] = data;
    } else {
      by_path[path] = data;
    }
  }
  const auto need = [](const std::map<std::string, const float*>& params, const std::string& path) {
    const auto it = params.find(path);
    MIRRORED_CHECK(it != params.end(), "GptDecoder: the model has no parameter ", path, " (not an nn::gpt?)");
    return it->second;
  };
  wte_ = need(by_path, "embedding.wte");
  wpe_ = need(by_path, "embedding.wpe");
  lnf_w_ = need(by_path, "layernorm.weight");
  lnf_b_ = need(by_path, "layernorm.bias");
  MIRRORED_CHECK(static_cast<int64_t>(block_params.size()) == spec.layers, "GptDecoder: ", block_params.size(),
                 " blocks, the spec says ", spec.layers);
  for (const auto& p : block_params)
    blocks_.push_back({need(p, "ln1.weight"), need(p, "ln1.bias"), need(p, "attn.qkv.weight"), need(p, "attn.qkv.bias"),
                       need(p, "attn.proj.weight"), need(p, "attn.proj.bias"), need(p, "ln2.weight"),
                       need(p, "ln2.bias"), need(p, "mlp.fc.weight"), need(p, "mlp.fc.bias"),
                       need(p, "mlp.proj.weight"), need(p, "mlp.proj.bias")});
  const auto width = static_cast<size_t>(spec.width);
  keys_.resize(static_cast<size_t>(spec.layers * spec.context) * width);
  values_.resize(keys_.size());
  x_.resize(width);
  h_.resize(width);
  qkv_.resize(3 * width);
  attended_.resize(width);
  hidden_.resize(4 * width);
  scores_.resize(static_cast<size_t>(spec.context));
  logits_.resize(static_cast<size_t>(spec.vocab));
}

const std::vector<float>& GptDecoder::step(int32_t token) {
  MIRRORED_CHECK(position_ < spec_.context, "GptDecoder: position ", position_, " is past the context of ",
                 spec_.context);
  MIRRORED_CHECK(token >= 0 && token < spec_.vocab, "token ", token, " outside the vocabulary of ", spec_.vocab);
  const int64_t C = spec_.width, H = spec_.heads, D = C / H, t = position_;
  for (int64_t c = 0; c < C; ++c) x_[c] = wte_[token * C + c] + wpe_[t * C + c];
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  for (size_t layer = 0; layer < blocks_.size(); ++layer) {
    const Block& b = blocks_[layer];
    float* keys = keys_.data() + static_cast<int64_t>(layer) * spec_.context * C;
    float* values = values_.data() + static_cast<int64_t>(layer) * spec_.context * C;
    layer_norm(x_.data(), b.ln1_w, b.ln1_b, C, h_.data());
    linear(b.qkv_w, b.qkv_b, h_.data(), C, 3 * C, qkv_.data());
    std::copy_n(qkv_.data() + C, C, keys + t * C);
    std::copy_n(qkv_.data() + 2 * C, C, values + t * C);
    for (int64_t head = 0; head < H; ++head) {
      const float* q = qkv_.data() + head * D;
      float top = -INFINITY;
      for (int64_t j = 0; j <= t; ++j) {
        const float* k = keys + j * C + head * D;
        float dot = 0.0f;
        for (int64_t d = 0; d < D; ++d) dot += q[d] * k[d];
        scores_[j] = dot * scale;
        top = std::max(top, scores_[j]);
      }
      float total = 0.0f;
      for (int64_t j = 0; j <= t; ++j) total += scores_[j] = std::exp(scores_[j] - top);
      float* out = attended_.data() + head * D;
      std::fill_n(out, D, 0.0f);
      for (int64_t j = 0; j <= t; ++j) {
        const float p = scores_[j] / total;
        const float* v = values + j * C + head * D;
        for (int64_t d = 0; d < D; ++d) out[d] += p * v[d];
      }
    }
    linear(b.proj_w, b.proj_b, attended_.data(), C, C, h_.data());
    for (int64_t c = 0; c < C; ++c) x_[c] += h_[c];
    layer_norm(x_.data(), b.ln2_w, b.ln2_b, C, h_.data());
    linear(b.fc_w, b.fc_b, h_.data(), C, 4 * C, hidden_.data());
    for (float& value : hidden_) value = kernels::gelu(value);
    linear(b.fc_proj_w, b.fc_proj_b, hidden_.data(), 4 * C, C, h_.data());
    for (int64_t c = 0; c < C; ++c) x_[c] += h_[c];
  }
  layer_norm(x_.data(), lnf_w_, lnf_b_, C, h_.data());
  linear(wte_, nullptr, h_.data(), C, spec_.vocab, logits_.data());  // the head tied to the token table
  ++position_;
  return logits_;
}

}  // namespace mirrored::nn
