#include "mirrored/config/model_identity.h"

#include "mirrored/core/strings.h"

namespace mirrored::config {
namespace {

std::string list(const std::vector<int64_t>& values) { return join(values, ","); }

// The shape keys of each kind, as one comparable text (also the description's parentheses).
std::string shape_of(const TrainConfig& c) {
  switch (c.model) {
    case ModelKind::kMlp: return str_cat("hidden ", list(c.hidden));
    case ModelKind::kCnn:
      return str_cat("channels ", list(c.cnn_channels), ", kernel ", c.cnn_kernel, ", padding ", c.cnn_padding, ", fc ",
                     list(c.cnn_fc), c.cnn_batchnorm ? ", batch norm" : "");
    case ModelKind::kResnet: return str_cat("channels ", list(c.resnet_channels), ", ", c.resnet_blocks, " blocks");
    case ModelKind::kGpt:
      return str_cat(c.gpt_layers, " layers, ", c.gpt_heads, " heads, width ", c.gpt_width, ", context ", c.gpt_context);
  }
  return "";
}

}  // namespace

std::string model_description(const TrainConfig& config) {
  return str_cat(model_kind_name(config.model), " (", shape_of(config), ")");
}

bool same_model(const TrainConfig& a, const TrainConfig& b) { return a.model == b.model && shape_of(a) == shape_of(b); }

std::string model_with_article(const TrainConfig& config) {
  // Said letter by letter, "mlp" begins with a vowel sound.
  return str_cat(config.model == ModelKind::kMlp ? "an " : "a ", model_description(config));
}

std::string held_model(const std::string& file, const TrainConfig& stored) {
  return str_cat("'", file, "' holds ", stored.model == ModelKind::kMlp ? "an " : "a ", model_kind_name(stored.model),
                 " model (", shape_of(stored), ")");
}

std::string model_mismatch(const std::string& file, const TrainConfig& stored, const std::string& subject,
                           const TrainConfig& current) {
  if (same_model(stored, current)) return "";
  return str_cat(held_model(file, stored), "; ", subject, " ", model_with_article(current));
}

}  // namespace mirrored::config
