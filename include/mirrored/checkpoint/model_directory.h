#pragma once
// A gpt exported as a model directory in Hugging Face's layout, which transformers'
// GPT2LMHeadModel.from_pretrained(DIR) loads as it stands:
//   model.safetensors        the parameters under GPT-2's names (checkpoint/gpt2_weights.h),
//                            the configuration also in its metadata
//   config.json              GPT2Config: vocab_size, n_positions, n_ctx, n_embd, n_layer,
//                            n_head, n_inner, activation_function, layer_norm_epsilon, the
//                            dropouts, tie_word_embeddings, model_type, architectures
//   generation_config.json   sampling as `mirrored generate` samples by default
//   tokenizer.model          the run's SentencePiece model, when it has one (byte tokens
//                            need none: a token is a byte, and an earlier export's
//                            tokenizer.model is removed)
// Every file is written whole or not at all (core/file_replacement.h). The directory is
// created with mode 0777 less the umask when missing; an existing one is used only when it
// is a real directory (not a symlink) of this user, and a symlink planted under a file's
// name is replaced, never written through.
#include <map>
#include <string>
#include <vector>

#include "mirrored/io/safetensors.h"
#include "mirrored/nn/builders.h"

namespace mirrored::checkpoint {

inline constexpr const char* kModelFileName = "model.safetensors";
inline constexpr const char* kTokenizerFileName = "tokenizer.model";

struct ModelDirectory {
  std::vector<io::SafetensorsTensor> tensors;     // gpt2_tensors
  nn::GptSpec spec;                               // vocab set to the token table's rows
  std::map<std::string, std::string> metadata;    // model.safetensors' __metadata__
  std::string tokenizer_model;                    // a SentencePiece .model to copy, or ""
};

// config.json's text for `spec`.
std::string gpt2_config_json(const nn::GptSpec& spec);
// generation_config.json's text.
std::string gpt2_generation_config_json(const nn::GptSpec& spec);

// Writes `dir` as above. Error(kWriteFailed) naming the directory when it cannot be made
// or is refused, or naming the file that cannot be written.
void write_model_directory(const std::string& dir, const ModelDirectory& contents);

// The safetensors file a path names: `path` itself, or a directory's model.safetensors.
// InputError (kCheckpoint) when neither exists.
std::string model_file_in(const std::string& path);

// Whether `path` is a safetensors file or a directory holding one (rather than an HDF5
// checkpoint, a parameter file or a run directory).
bool is_safetensors_model(const std::string& path);

// A gpt's shape from a safetensors model (a file or a model directory): its metadata's
// GPT2Config fields n_layer, n_head, n_embd, n_positions and vocab_size, as `mirrored
// export` writes them. InputError (kUsage) naming the file and the key that is missing or
// not a positive integer.
nn::GptSpec gpt2_spec_of(const std::string& path);

}  // namespace mirrored::checkpoint
