#pragma once
// Text from a trained gpt, one token at a time (`mirrored generate`): the next-token logits
// of a window of tokens, and the draw of the next token from them.
#include <cstdint>
#include <optional>
#include <vector>

#include "mirrored/core/rng.h"
#include "mirrored/core/tensor.h"
#include "mirrored/nn/builders.h"
#include "mirrored/nn/gpt_decoder.h"
#include "mirrored/nn/model.h"

namespace mirrored::nn {

// One token from `logits` [vocab]: the most likely at temperature 0, else a draw from the
// softmax of logits / temperature restricted to the top_k most likely (0: all; ties keep the
// lower token id, so the choice is a function of the logits and the generator alone).
int32_t sample_token(const float* logits, int64_t vocab, double temperature, int64_t top_k, Rng& rng);

// The next-token logits of the window tokens[start, end) of a growing sequence, by one of
// two paths that give the same logits up to float summation order: with the key/value cache
// (GptDecoder) only the tokens not yet in the cache run, and a new `start` empties it (it
// holds absolute positions); without it the whole window runs through Model::forward,
// zero-padded to the context (causal attention: the padding cannot change a position before
// it). `model` (built, on the host) and `spec` must outlive this object.
class NextTokenLogits {
 public:
  NextTokenLogits(Model& model, const GptSpec& spec, bool cached);

  // The logits [vocab] after tokens[start, tokens.size()), valid until the next call. With
  // `all`, also appends (cached) or assigns (uncached) the logits of every position that ran.
  const float* operator()(const std::vector<int32_t>& tokens, size_t start, std::vector<float>* all);

 private:
  Model& model_;
  GptSpec spec_;
  std::optional<GptDecoder> decoder_;
  size_t cache_start_ = SIZE_MAX;
  Tensor window_;
};

}  // namespace mirrored::nn
