#pragma once
// Token-by-token inference for nn::gpt with a key/value cache: each new token costs one
// position (its projections, attention over the cached keys and values, its MLP and the
// output head) instead of a forward pass over the whole window. The same function as
// Model::forward at that position, up to float summation order. Host memory, one sequence.
#include <cstdint>
#include <vector>

#include "mirrored/nn/builders.h"
#include "mirrored/nn/parameter_arena.h"

namespace mirrored::nn {

class GptDecoder {
 public:
  // Views the parameters of a built gpt on the host (the arena must outlive the decoder).
  GptDecoder(const ParameterArena& arena, const GptSpec& spec);

  int64_t position() const { return position_; }  // tokens in the cache
  int64_t context() const { return spec_.context; }
  void reset() { position_ = 0; }
  // Appends `token` at position() (which must be below the context) and returns the logits
  // [vocab] for the next token; valid until the next call.
  const std::vector<float>& step(int32_t token);

 private:
  struct Block {
    const float *ln1_w, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b;
    const float *ln2_w, *ln2_b, *fc_w, *fc_b, *fc_proj_w, *fc_proj_b;
  };
  GptSpec spec_;
  const float *wte_ = nullptr, *wpe_ = nullptr, *lnf_w_ = nullptr, *lnf_b_ = nullptr;
  std::vector<Block> blocks_;
  std::vector<float> keys_, values_;  // [layers, context, width] each
  int64_t position_ = 0;
  // Scratch for one position.
  std::vector<float> x_, h_, qkv_, attended_, hidden_, scores_, logits_;
};

}  // namespace mirrored::nn
