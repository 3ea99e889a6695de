#include "mirrored/checkpoint/gpt2_weights.h"

#include <algorithm>
#include <set>

#include "mirrored/core/error.h"
#include "mirrored/core/strings.h"

namespace mirrored::checkpoint {
namespace {

constexpr const char* kHubPrefix = "transformer.";

// Where one arena parameter goes: its GPT-2 name, and whether its matrix is transposed
// there (Conv1D weights).
struct Gpt2Slot {
  std::string name;
  bool transposed = false;
};

// nn::gpt's parameter names are "<layer>.<kind>.<path>": the embedding's wte and wpe, each
// block's ln1, attn.qkv, attn.proj, ln2, mlp.fc, mlp.proj, and the final layernorm.
std::vector<Gpt2Slot> gpt2_slots(const nn::ParameterArena& arena) {
  static const std::map<std::string, std::pair<std::string, bool>> kBlock = {
      {"ln1.weight", {"ln_1.weight", false}},           {"ln1.bias", {"ln_1.bias", false}},
      {"attn.qkv.weight", {"attn.c_attn.weight", true}}, {"attn.qkv.bias", {"attn.c_attn.bias", false}},
      {"attn.proj.weight", {"attn.c_proj.weight", true}}, {"attn.proj.bias", {"attn.c_proj.bias", false}},
      {"ln2.weight", {"ln_2.weight", false}},           {"ln2.bias", {"ln_2.bias", false}},
      {"mlp.fc.weight", {"mlp.c_fc.weight", true}},      {"mlp.fc.bias", {"mlp.c_fc.bias", false}},
      {"mlp.proj.weight", {"mlp.c_proj.weight", true}},  {"mlp.proj.bias", {"mlp.c_proj.bias", false}}};
  std::vector<Gpt2Slot> slots;
  int64_t block = -1;
  size_t block_layer = SIZE_MAX;
  for (const nn::ParameterInfo& info : arena.infos()) {
    const std::vector<std::string> parts = split(info.name, '.');
    MIRRORED_CHECK(parts.size() >= 3, "parameter name ", info.name);
    const std::string& kind = parts[1];
    std::string rest = info.name.substr(parts[0].size() + kind.size() + 2);
    if (kind == "embedding" && (rest == "wte" || rest == "wpe")) {
      slots.push_back({str_cat(kHubPrefix, rest, ".weight"), false});
    } else if (kind == "block" && kBlock.count(rest)) {
      if (info.layer != block_layer) {
        block_layer = info.layer;
        ++block;
      }
      const auto& [name, transposed] = kBlock.at(rest);
      slots.push_back({str_cat(kHubPrefix, "h.", block, ".", name), transposed});
    } else if (kind == "layernorm" && (rest == "weight" || rest == "bias")) {
      slots.push_back({str_cat(kHubPrefix, "ln_f.", rest), false});
    } else {
      throw InputError(str_cat("parameter ", info.name, " has no GPT-2 counterpart (is the model a gpt?)"),
                       ExitCode::kUsage);
    }
  }
  return slots;
}

std::vector<int64_t> stored_shape(const Shape& shape, bool transposed) {
  std::vector<int64_t> out(shape.begin(), shape.end());
  if (transposed) std::reverse(out.begin(), out.end());
  return out;
}

// [rows, cols] row-major -> [cols, rows].
std::vector<float> transpose(const std::vector<float>& values, int64_t rows, int64_t cols) {
  std::vector<float> out(values.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[static_cast<size_t>(c * rows + r)] = values[static_cast<size_t>(r * cols + c)];
  return out;
}

}  // namespace

std::vector<io::SafetensorsTensor> gpt2_tensors(const nn::ParameterArena& arena) {
  const std::vector<Gpt2Slot> slots = gpt2_slots(arena);
  std::vector<io::SafetensorsTensor> tensors;
  for (size_t i = 0; i < arena.size(); ++i) {
    const Shape& shape = arena.info(i).shape;
    std::vector<float> values = arena.param(i).to_vector();
    if (slots[i].transposed) values = transpose(values, shape[0], shape[1]);
    tensors.push_back({slots[i].name, stored_shape(shape, slots[i].transposed), std::move(values)});
  }
  return tensors;
}

std::map<std::string, std::string> gpt2_metadata(const nn::GptSpec& spec) {
  return {{"format", "pt"},
          {"model_type", "gpt2"},
          {"n_layer", std::to_string(spec.layers)},
          {"n_head", std::to_string(spec.heads)},
          {"n_embd", std::to_string(spec.width)},
          {"n_positions", std::to_string(spec.context)},
          {"vocab_size", std::to_string(spec.vocab)},
          {"layer_norm_epsilon", "1e-05"},
          {"activation_function", "gelu_new"},
          {"tie_word_embeddings", "true"}};
}

std::vector<float> read_gpt2_parameters(const io::SafetensorsFile& file, const nn::ParameterArena& arena) {
  const std::vector<Gpt2Slot> slots = gpt2_slots(arena);
  // GPT2Model's names lack the prefix; a file uses one form throughout.
  const bool prefixed = file.contains(str_cat(kHubPrefix, "wte.weight"));
  const auto name_in_file = [&](const std::string& name) {
    return prefixed ? name : name.substr(std::string(kHubPrefix).size());
  };
  std::vector<float> flat(static_cast<size_t>(arena.numel()));
  std::set<std::string> used;
  for (size_t i = 0; i < arena.size(); ++i) {
    const nn::ParameterInfo& info = arena.info(i);
    const std::string name = name_in_file(slots[i].name);
    if (!file.contains(name))
      throw InputError(str_cat("'", file.path(), "': tensor ", name, " is missing (expected GPT-2's layout; this gpt's ",
                               info.name, ")"));
    const std::vector<int64_t> expected = stored_shape(info.shape, slots[i].transposed);
    if (file.shape(name) != expected)
      throw InputError(str_cat("'", file.path(), "': tensor ", name, " has shape ", shape_str(file.shape(name)),
                               ", expected ", shape_str(expected), " for this run's gpt (", info.name, " ",
                               shape_str(info.shape), ")"));
    std::vector<float> values = file.read(name);
    if (slots[i].transposed) values = transpose(values, expected[0], expected[1]);
    std::copy(values.begin(), values.end(), flat.begin() + info.offset);
    used.insert(name);
  }
  const std::string wte = name_in_file(str_cat(kHubPrefix, "wte.weight"));
  for (const std::string& name : file.names()) {
    if (used.count(name)) continue;
    // The causal mask buffers older transformers versions saved carry no parameters.
    if (name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias")) continue;
    if (name == "lm_head.weight" && file.shape(name) == file.shape(wte) && file.read(name) == file.read(wte)) continue;
    throw InputError(str_cat("'", file.path(), "': tensor ", name,
                             name == "lm_head.weight" ? " differs from " + wte + ": this gpt ties its output head to the token table"
                                                      : " is not part of this run's gpt (a model of another shape?)"));
  }
  return flat;
}

}  // namespace mirrored::checkpoint
