#include "mirrored/nn/text_generation.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "mirrored/core/error.h"

namespace mirrored::nn {

int32_t sample_token(const float* logits, int64_t vocab, double temperature, int64_t top_k, Rng& rng) {
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  if (temperature == 0.0) return order.front();
  const size_t keep = top_k > 0 ? static_cast<size_t>(std::min(top_k, vocab)) : order.size();
  std::vector<double> weights(keep);
  const double top = logits[order.front()];
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) total += weights[i] = std::exp((logits[order[i]] - top) / temperature);
  double u = static_cast<double>(rng.uniform()) * total;
  for (size_t i = 0; i < keep; ++i) {
    if (u < weights[i]) return order[i];
    u -= weights[i];
  }
  return order[keep - 1];
}

NextTokenLogits::NextTokenLogits(Model& model, const GptSpec& spec, bool cached) : model_(model), spec_(spec) {
  if (cached) {
    decoder_.emplace(model.parameters(), spec);
  } else {
    window_ = Tensor({1, spec.context}, DType::kI32);
  }
}

const float* NextTokenLogits::operator()(const std::vector<int32_t>& tokens, size_t start, std::vector<float>* all) {
  const size_t end = tokens.size();
  if (decoder_) {
    if (start != cache_start_) {
      decoder_->reset();
      cache_start_ = start;
    }
    const std::vector<float>* logits = nullptr;
    for (size_t i = start + static_cast<size_t>(decoder_->position()); i < end; ++i) {
      logits = &decoder_->step(tokens[i]);
      if (all) all->insert(all->end(), logits->begin(), logits->end());
    }
    MIRRORED_CHECK(logits != nullptr, "no new token for the cache");
    return logits->data();
  }
  const int64_t n = static_cast<int64_t>(end - start);
  int32_t* ids = window_.data<int32_t>();
  std::fill(ids, ids + spec_.context, 0);
  std::copy(tokens.begin() + static_cast<std::ptrdiff_t>(start), tokens.end(), ids);
  const Tensor& logits = model_.forward(window_, Mode::kEval);  // [1, context, vocab]
  if (all) all->assign(logits.data<float>(), logits.data<float>() + n * spec_.vocab);
  return logits.data<float>() + (n - 1) * spec_.vocab;
}

}  // namespace mirrored::nn
