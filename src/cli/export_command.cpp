// mirrored export --checkpoint F [--config F] --out DIR | FILE.safetensors
// A trained gpt as a model directory that transformers' GPT2LMHeadModel.from_pretrained
// loads (checkpoint/model_directory.h: model.safetensors, config.json,
// generation_config.json, the run's tokenizer.model), or, for an --out ending in
// .safetensors, that one file: the parameters under GPT-2's names and layouts
// (checkpoint/gpt2_weights.h), the configuration in its metadata (GPT2Config's field
// names) with the tokenizer's name and digest. `generate`, `eval` and `init_from` read
// either back.
#include <boost/program_options.hpp>

#include <filesystem>

#include "commands.h"
#include "parse_options.h"
#include "mirrored/checkpoint/gpt2_weights.h"
#include "mirrored/checkpoint/model_directory.h"
#include "mirrored/checkpoint/saved_model.h"
#include "mirrored/config/model_identity.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/data/shard_list.h"
#include "mirrored/data/token_file.h"
#include "mirrored/io/safetensors.h"

namespace mirrored::cli {
namespace po = boost::program_options;

int export_command(const Args& args) {
  std::string checkpoint, config, out;
  po::options_description desc("usage: mirrored export --checkpoint FILE --out DIR|FILE.safetensors [options]");
  desc.add_options()("help,h", "print this help")(
      "checkpoint", po::value(&checkpoint)->required(),
      "a gpt run's checkpoint (checkpoints/ckpt-*.h5), final.h5, or its directory")(
      "config", po::value(&config), "for a final.h5: the run's config.ini (default: next to it)")(
      "out", po::value(&out)->required(), "the model directory to write (created if missing), or one FILE.safetensors");
  po::variables_map values;
  if (!parse_options(args, desc, nullptr, values, "export")) return 0;

  const checkpoint::SavedModel saved = checkpoint::find_saved_model("export", checkpoint, config);
  if (saved.lib.model.kind != config::ModelKind::kGpt)
    throw InputError(str_cat("export: ", config::held_model(saved.parameters, saved.config),
                             "; export writes a gpt in GPT-2's layout"),
                     ExitCode::kCheckpoint);
  const config::ModelInputs inputs = checkpoint::saved_token_model_inputs(saved);
  nn::Model model = checkpoint::load_saved_model(saved, inputs);
  nn::GptSpec spec = saved.lib.model.gpt;
  spec.vocab = inputs.num_classes;
  checkpoint::ModelDirectory contents{checkpoint::gpt2_tensors(model.parameters()), spec,
                                      checkpoint::gpt2_metadata(spec), ""};
  // Which token ids the model reads, when the run's training file says: a model is only
  // useful with the tokenizer it was trained on.
  std::error_code error;
  const std::string train = data::first_shard(saved.lib.data.train);
  if (std::filesystem::exists(train, error)) {
    try {
      const data::TokenFileInfo info = data::describe_token_file(train);
      contents.metadata["mirrored_tokenizer"] = info.tokenizer;
      if (!info.tokenizer_sha256.empty()) contents.metadata["mirrored_tokenizer_sha256"] = info.tokenizer_sha256;
    } catch (const InputError&) {  // not a token file after all: the weights are still the model
    }
  }
  if (!out.ends_with(".safetensors") && contents.metadata["mirrored_tokenizer"] == data::kSentencePieceTokenizer) {
    try {  // the model the data names, checked against the digest the data recorded
      contents.tokenizer_model = checkpoint::saved_tokenizer(saved, spec.vocab, "").model_path();
    } catch (const InputError& e) {
      rank_warning(str_cat("export: ", e.what(), "; the directory gets no tokenizer.model"));
    }
  }
  const size_t count = contents.tensors.size();
  if (out.ends_with(".safetensors")) {
    io::write_safetensors(out, contents.tensors, contents.metadata);
  } else {
    checkpoint::write_model_directory(out, contents);
  }
  chief_print(str_cat("wrote ", count, " tensors (", model.parameters().numel(), " parameters, GPT-2 layout) to ", out,
                      out.ends_with(".safetensors")       ? ""
                      : contents.tokenizer_model.empty() ? " with config.json (byte tokens: no tokenizer file)"
                                                          : " with config.json and tokenizer.model"));
  return 0;
}

}  // namespace mirrored::cli
