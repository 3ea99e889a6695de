#include "mirrored/nn/builders.h"

#include <cmath>

#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/conv.h"
#include "mirrored/nn/layers.h"
#include "mirrored/nn/transformer.h"

namespace mirrored::nn {

Model mlp(const MlpSpec& spec) {
  MIRRORED_CHECK(spec.num_classes > 0, "mlp needs num_classes > 0, got ", spec.num_classes);
  Model model;
  for (int64_t width : spec.hidden) {
    model.add(std::make_unique<Linear>(width));
    model.add(std::make_unique<ReLU>());
  }
  model.add(std::make_unique<Linear>(spec.num_classes));
  return model;
}

Model cnn(const CnnSpec& spec) {
  MIRRORED_CHECK(spec.num_classes > 0 && !spec.channels.empty(), "cnn needs channels and num_classes > 0");
  Model model;
  for (int64_t channels : spec.channels) {
    // A batch norm right after the conv makes the conv's bias redundant (beta replaces it).
    model.add(std::make_unique<Conv2d>(channels, spec.kernel, 1, spec.padding, /*bias=*/!spec.batchnorm));
    if (spec.batchnorm) model.add(std::make_unique<BatchNorm2d>(spec.sync_batchnorm));
    // ReLU and max pooling commute (both are monotone: max(relu(a), relu(b)) =
    // relu(max(a, b))), so pooling first gives the same function with the ReLU on a
    // quarter of the values, forward and backward.
    if (spec.pool > 1) model.add(std::make_unique<MaxPool2d>(spec.pool));
    model.add(std::make_unique<ReLU>());
  }
  model.add(std::make_unique<Flatten>());
  for (int64_t width : spec.hidden) {
    model.add(std::make_unique<Linear>(width));
    model.add(std::make_unique<ReLU>());
    if (spec.dropout > 0.0f) model.add(std::make_unique<Dropout>(spec.dropout));
  }
  model.add(std::make_unique<Linear>(spec.num_classes));
  return model;
}

Model resnet(const ResNetSpec& spec) {
  MIRRORED_CHECK(spec.num_classes > 0 && !spec.channels.empty() && spec.blocks > 0,
                 "resnet needs channels, blocks > 0 and num_classes > 0");
  Model model;
  model.add(std::make_unique<Conv2d>(spec.channels[0], 3, 1, 1, /*bias=*/false));
  model.add(std::make_unique<BatchNorm2d>(spec.sync_batchnorm));
  model.add(std::make_unique<ReLU>());
  for (size_t stage = 0; stage < spec.channels.size(); ++stage) {
    for (int64_t block = 0; block < spec.blocks; ++block) {
      const int64_t stride = stage > 0 && block == 0 ? 2 : 1;
      model.add(std::make_unique<ResidualBlock>(spec.channels[stage], stride, spec.sync_batchnorm));
    }
  }
  model.add(std::make_unique<AvgPool2d>());  // global
  model.add(std::make_unique<Flatten>());
  model.add(std::make_unique<Linear>(spec.num_classes));
  return model;
}

Model gpt(const GptSpec& spec) {
  MIRRORED_CHECK(spec.vocab > 0 && spec.context > 0 && spec.width > 0 && spec.heads > 0 && spec.layers > 0,
                 "gpt needs positive vocab, context, width, heads and layers, got vocab ", spec.vocab, ", context ",
                 spec.context, ", width ", spec.width, ", heads ", spec.heads, ", layers ", spec.layers);
  MIRRORED_CHECK(spec.width % spec.heads == 0, "gpt: width ", spec.width, " is not a multiple of heads ",
                 spec.heads);
  MIRRORED_CHECK(spec.width / spec.heads <= kernels::kMaxAttentionHeadSize, "gpt: width ", spec.width, " / heads ",
                 spec.heads, " = head size ", spec.width / spec.heads, ", above ", kernels::kMaxAttentionHeadSize,
                 ", the largest the attention supports on any device (use more heads)");
  MIRRORED_CHECK(spec.dropout >= 0.0f && spec.dropout < 1.0f, "gpt: dropout ", spec.dropout, " outside [0, 1)");
  Model model;
  auto embedding = std::make_unique<Embedding>(spec.vocab, spec.context, spec.width);
  const Embedding& token_table = *embedding;  // owned by the model from here on
  model.add(std::move(embedding));
  if (spec.dropout > 0.0f) model.add(std::make_unique<Dropout>(spec.dropout));
  // GPT-2 scales the projections that write into the residual stream by 1/sqrt(2 layers):
  // each block adds two, and the stream's variance then stays O(1) with depth.
  const float projection_std = 0.02f / std::sqrt(2.0f * static_cast<float>(spec.layers));
  for (int64_t i = 0; i < spec.layers; ++i)
    model.add(std::make_unique<TransformerBlock>(spec.heads, spec.dropout, projection_std));
  model.add(std::make_unique<LayerNorm>());
  model.add(std::make_unique<TiedLmHead>(token_table));
  return model;
}

}  // namespace mirrored::nn
