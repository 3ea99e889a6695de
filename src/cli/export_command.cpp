// mirrored export --checkpoint F [--config F] --out model.safetensors
// A trained gpt's parameters as a safetensors file under the names and layouts of Hugging
// Face transformers' GPT2LMHeadModel (checkpoint/gpt2_weights.h), its configuration in the
// file's metadata (GPT2Config's field names), and the tokenizer of its training data when
// that file is at hand. `init_from = model.safetensors` reads it back.
#include <boost/program_options.hpp>

#include <filesystem>

#include "commands.h"
#include "parse_options.h"
#include "mirrored/checkpoint/gpt2_weights.h"
#include "mirrored/checkpoint/saved_model.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/data/shard_list.h"
#include "mirrored/data/token_file.h"
#include "mirrored/io/safetensors.h"

namespace mirrored::cli {
namespace po = boost::program_options;

int export_command(const Args& args) {
  std::string checkpoint, config, out;
  po::options_description desc("usage: mirrored export --checkpoint FILE --out FILE.safetensors [options]");
  desc.add_options()("help,h", "print this help")(
      "checkpoint", po::value(&checkpoint)->required(),
      "a gpt run's checkpoint (checkpoints/ckpt-*.h5), final.h5, or its directory")(
      "config", po::value(&config), "for a final.h5: the run's config.ini (default: next to it)")(
      "out", po::value(&out)->required(), "the safetensors file to write");
  po::variables_map values;
  if (!parse_options(args, desc, nullptr, values, "export")) return 0;

  const checkpoint::SavedModel saved = checkpoint::find_saved_model("export", checkpoint, config);
  if (saved.lib.model.kind != config::ModelKind::kGpt)
    throw InputError(str_cat("export: ", saved.config_origin, " names model = ",
                             config::model_kind_name(saved.lib.model.kind),
                             "; export writes a gpt in GPT-2's layout"),
                     ExitCode::kUsage);
  const config::ModelInputs inputs = checkpoint::saved_token_model_inputs(saved);
  nn::Model model = checkpoint::load_saved_model(saved, inputs);
  nn::GptSpec spec = saved.lib.model.gpt;
  spec.vocab = inputs.num_classes;
  std::map<std::string, std::string> metadata = checkpoint::gpt2_metadata(spec);
  // Which token ids the model reads, when the run's training file says: a model is only
  // useful with the tokenizer it was trained on.
  std::error_code error;
  const std::string train = data::first_shard(saved.lib.data.train);
  if (std::filesystem::exists(train, error)) {
    try {
      const data::TokenFileInfo info = data::describe_token_file(train);
      metadata["mirrored_tokenizer"] = info.tokenizer;
      if (!info.tokenizer_sha256.empty()) metadata["mirrored_tokenizer_sha256"] = info.tokenizer_sha256;
    } catch (const InputError&) {  // not a token file after all: the weights are still the model
    }
  }
  const std::vector<io::SafetensorsTensor> tensors = checkpoint::gpt2_tensors(model.parameters());
  io::write_safetensors(out, tensors, metadata);
  chief_print(str_cat("wrote ", tensors.size(), " tensors (", model.parameters().numel(), " parameters, GPT-2 layout) to ",
                      out));
  return 0;
}

}  // namespace mirrored::cli
