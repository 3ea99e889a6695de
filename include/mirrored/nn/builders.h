#pragma once
// Models from configuration.
#include <vector>

#include "mirrored/nn/model.h"

namespace mirrored::nn {

struct MlpSpec {
  std::vector<int64_t> hidden = {256, 128};
  int64_t num_classes = 10;
};
// Linear+ReLU for each hidden width, then Linear to num_classes. Not yet built.
Model mlp(const MlpSpec& spec);

struct CnnSpec {
  std::vector<int64_t> channels = {32, 64};  // one conv + pool stage per entry
  int64_t kernel = 5;
  int64_t padding = 0;
  int64_t pool = 2;
  std::vector<int64_t> hidden = {128};       // fully connected layers after the convs
  bool batchnorm = false;                    // BatchNorm2d after each conv (conv bias off)
  bool sync_batchnorm = false;
  float dropout = 0.0f;                      // after each hidden fully connected layer
  int64_t num_classes = 10;
};
// For each channel count: Conv2d(kernel, padding) [-> BatchNorm2d] -> ReLU -> MaxPool2d(pool),
// built as MaxPool2d then ReLU (the same function, cheaper: see builders.cpp);
// then Flatten, Linear+ReLU [+Dropout] per hidden width, Linear to num_classes.
Model cnn(const CnnSpec& spec);

struct ResNetSpec {
  std::vector<int64_t> channels = {16, 32, 64};  // one stage per entry
  int64_t blocks = 2;                             // residual blocks per stage
  bool sync_batchnorm = false;
  int64_t num_classes = 10;
};
// A small ResNet for 28x28 inputs: a 3x3 stem conv (channels[0]) + BatchNorm2d + ReLU,
// stages of basic residual blocks (the first block of every stage after the first halves
// the resolution), global average pooling, Flatten, Linear to num_classes.
Model resnet(const ResNetSpec& spec);

struct GptSpec {
  int64_t vocab = 50257;
  int64_t context = 1024;  // the longest sequence (rows of the position table)
  int64_t width = 768;
  int64_t heads = 12;
  int64_t layers = 12;
  float dropout = 0.0f;    // after the embeddings, the attention projection and the MLP
};
// GPT-2: token + position Embedding [-> Dropout], `layers` pre-LayerNorm TransformerBlocks,
// a final LayerNorm and an output head tied to the token table (transformer.h). Inputs are
// int32 token ids: build with the per-sample shape {T}, T <= context; the output is logits
// [B, T, vocab], for a cross-entropy over B * T rows against the next tokens. Initialised as
// GPT-2: weights and tables ~ normal(0, 0.02), the residual projections'
// 0.02 / sqrt(2 layers), biases 0, LayerNorm gamma 1 and beta 0. Not yet built.
Model gpt(const GptSpec& spec);

}  // namespace mirrored::nn
