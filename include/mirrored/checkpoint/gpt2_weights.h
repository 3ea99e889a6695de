#pragma once
// A gpt's parameters in the layout of Hugging Face transformers' GPT2LMHeadModel, the usual
// GPT-2 in PyTorch, so that a model trained here runs there and one trained there can be
// fine-tuned here. The names are its state dict's:
//   transformer.wte.weight [vocab, C]        transformer.wpe.weight [context, C]
//   transformer.h.N.ln_1.weight|bias [C]     transformer.h.N.ln_2.weight|bias [C]
//   transformer.h.N.attn.c_attn.weight [C, 3C] .bias [3C]   (q, k, v side by side)
//   transformer.h.N.attn.c_proj.weight [C, C]  .bias [C]
//   transformer.h.N.mlp.c_fc.weight [C, 4C]    .bias [4C]
//   transformer.h.N.mlp.c_proj.weight [4C, C]  .bias [C]
//   transformer.ln_f.weight|bias [C]
// GPT-2's projections are Conv1D modules, whose weight is [in, out]: the transpose of
// mirrored's (and nn.Linear's) [out, in]. The output head is tied to wte, so lm_head.weight
// is not written (as save_pretrained leaves it out); on reading it may be present only as a
// copy of wte. Reading also takes the names without "transformer." (GPT2Model's).
#include <map>
#include <string>
#include <vector>

#include "mirrored/io/safetensors.h"
#include "mirrored/nn/builders.h"
#include "mirrored/nn/parameter_arena.h"

namespace mirrored::checkpoint {

// The arena's tensors (host copies) under GPT-2's names and layouts, in model order.
std::vector<io::SafetensorsTensor> gpt2_tensors(const nn::ParameterArena& arena);

// GPT2Config's fields (n_layer, n_head, n_embd, n_positions, vocab_size,
// layer_norm_epsilon, activation_function, tie_word_embeddings) as safetensors metadata,
// with "format": "pt" as save_pretrained writes it.
std::map<std::string, std::string> gpt2_metadata(const nn::GptSpec& spec);

// The arena's parameters in arena order (its flat layout) from a GPT-2 file. InputError
// naming the file and the first tensor that is missing, has another shape than `arena`'s
// gpt needs, or is not one of its tensors.
std::vector<float> read_gpt2_parameters(const io::SafetensorsFile& file, const nn::ParameterArena& arena);

}  // namespace mirrored::checkpoint
