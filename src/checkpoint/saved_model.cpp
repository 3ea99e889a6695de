#include "mirrored/checkpoint/saved_model.h"

#include <filesystem>
#include <optional>

#include "mirrored/checkpoint/gpt2_weights.h"
#include "mirrored/checkpoint/model_directory.h"
#include "mirrored/config/model_factory.h"
#include "mirrored/config/model_identity.h"
#include "mirrored/core/error.h"
#include "mirrored/data/shard_list.h"
#include "mirrored/data/token_file.h"
#include "mirrored/io/checkpoint_file.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/io/hdf5.h"
#include "mirrored/io/params_file.h"

namespace mirrored::checkpoint {
namespace fs = std::filesystem;
namespace {

// nn::gpt's token table: its rows are the vocabulary.
constexpr const char* kTokenTable = "/params/0.embedding.wte";

bool is_checkpoint_file(const std::string& path) {
  const io::H5File file(path, io::H5File::Access::kRead);
  return file.has_attribute("format") && file.read_string_attribute("format") == "mirrored-checkpoint";
}

std::string parameters_in(const std::string& command, const std::string& path) {
  if (!fs::exists(path))
    throw InputError(str_cat(command, ": checkpoint '", path, "' does not exist"), ExitCode::kCheckpoint);
  if (!fs::is_directory(path)) return path;
  const std::string final_params = (fs::path(path) / "final.h5").string();
  if (!fs::exists(final_params))
    throw InputError(str_cat(command, ": the run directory '", path,
                             "' has no final.h5 (did the run finish?); pass one of its checkpoints/ckpt-*.h5"),
                     ExitCode::kCheckpoint);
  return final_params;
}

void load_parameters_into(const SavedModel& saved, nn::ParameterArena& arena) {
  if (!saved.safetensors) return io::load_parameters(saved.parameters, arena);
  const std::vector<float> values = read_gpt2_parameters(io::SafetensorsFile(saved.parameters), arena);
  Tensor& params = arena.flat_params();
  kernels::copy(Tensor::from(values, params.shape()), params);
}

// The configuration a file records for its own model: a checkpoint's stored one, or the
// config.ini beside a parameter file; nothing when there is none or it cannot be read (the
// tensors are then compared by name and shape as they load).
std::optional<config::TrainConfig> recorded_config(const std::string& parameters) {
  try {
    if (is_checkpoint_file(parameters))
      return config::parse_config_text(io::read_checkpoint(parameters).config, "the stored configuration",
                                       /*ignore_unknown_keys=*/true);
    const std::string ini = (fs::path(parameters).parent_path() / "config.ini").string();
    if (fs::exists(ini)) return config::parse_train_config({"--config", ini});
  } catch (const InputError&) {
  }
  return std::nullopt;
}

// --config names the architecture to build; a file that records another one is refused,
// once, before any tensor is read.
void check_recorded_model(const std::string& command, const std::string& parameters,
                          const std::optional<config::TrainConfig>& recorded, const std::string& config_path,
                          const config::TrainConfig& config) {
  if (!recorded) return;
  const std::string other =
      config::model_mismatch(parameters, *recorded, str_cat("--config '", config_path, "' builds"), config);
  if (!other.empty()) throw InputError(str_cat(command, ": ", other), ExitCode::kCheckpoint);
}

// A gpt's configuration from an export's metadata (GPT2Config's fields).
config::TrainConfig exported_config(const std::string& file, const std::string& origin) {
  const nn::GptSpec spec = gpt2_spec_of(file);
  return config::parse_config_text(str_cat("model = gpt\ngpt.layers = ", spec.layers, "\ngpt.heads = ", spec.heads,
                                           "\ngpt.width = ", spec.width, "\ngpt.context = ", spec.context, "\n"),
                                   origin);
}

// An export: the shape from the file's metadata, every other setting the defaults (data
// comes from the command's own flags), unless --config names the run's config.ini.
SavedModel find_exported_model(const std::string& command, const std::string& path, const std::string& config_path) {
  SavedModel saved;
  saved.safetensors = true;
  try {
    saved.parameters = model_file_in(path);
    if (!config_path.empty()) {
      saved.config_origin = str_cat("'", config_path, "'");
      saved.config = config::parse_train_config({"--config", config_path});
    } else {
      saved.config_origin = str_cat("the metadata of '", saved.parameters, "'");
      saved.config = exported_config(saved.parameters, saved.config_origin);
      saved.config.train_data.clear();  // no training file: the tokenizer is the directory's
    }
  } catch (const InputError& e) {
    throw InputError(str_cat(command, ": ", e.what()), e.code());
  }
  if (!config_path.empty()) {
    std::optional<config::TrainConfig> recorded;
    try {
      if (io::SafetensorsFile(saved.parameters).metadata().count("n_layer"))
        recorded = exported_config(saved.parameters, "the metadata");
    } catch (const InputError&) {
    }
    check_recorded_model(command, saved.parameters, recorded, config_path, saved.config);
  }
  const fs::path tokenizer = fs::path(saved.parameters).parent_path() / kTokenizerFileName;
  std::error_code error;
  if (fs::is_directory(path, error) && fs::exists(tokenizer, error)) saved.tokenizer_model = tokenizer.string();
  saved.lib = config::library_options(saved.config);
  return saved;
}

}  // namespace

SavedModel find_saved_model(const std::string& command, const std::string& path, const std::string& config_path) {
  if (is_safetensors_model(path)) return find_exported_model(command, path, config_path);
  SavedModel saved;
  saved.parameters = parameters_in(command, path);
  if (config_path.empty() && is_checkpoint_file(saved.parameters)) {
    saved.config_origin = str_cat("the configuration stored in '", saved.parameters, "'");
    saved.config = config::parse_config_text(io::read_checkpoint(saved.parameters).config, saved.config_origin,
                                     /*ignore_unknown_keys=*/true);
  } else {
    const std::string ini =
        config_path.empty() ? (fs::path(saved.parameters).parent_path() / "config.ini").string() : config_path;
    if (config_path.empty() && !fs::exists(ini))
      throw InputError(str_cat(command, ": '", saved.parameters, "' is a parameter file and '", ini,
                               "' does not exist; pass the config.ini of the run that wrote it with --config"
                               " (it names the model)"),
                       ExitCode::kUsage);
    saved.config_origin = str_cat("'", ini, "'");
    saved.config = config::parse_train_config({"--config", ini});
    if (!config_path.empty())
      check_recorded_model(command, saved.parameters, recorded_config(saved.parameters), config_path, saved.config);
  }
  saved.lib = config::library_options(saved.config);
  return saved;
}

config::ModelInputs saved_token_model_inputs(const SavedModel& saved) {
  MIRRORED_CHECK(saved.lib.model.kind == config::ModelKind::kGpt, "token inputs of a ",
                 config::model_kind_name(saved.lib.model.kind));
  if (saved.safetensors) {
    const io::SafetensorsFile file(saved.parameters);
    const std::string table = file.contains("transformer.wte.weight") ? "transformer.wte.weight" : "wte.weight";
    if (!file.contains(table))
      throw InputError(str_cat("'", saved.parameters, "' has no transformer.wte.weight, the token table of a GPT-2"),
                       ExitCode::kCheckpoint);
    return {{saved.lib.data.context}, static_cast<int>(file.shape(table).at(0))};
  }
  const io::H5File file(saved.parameters, io::H5File::Access::kRead);
  if (!file.exists(kTokenTable))
    throw InputError(str_cat("'", saved.parameters, "' has no ", kTokenTable, ", the token table of the gpt that ",
                             saved.config_origin, " names (a file of another model?)"),
                     ExitCode::kCheckpoint);
  return {{saved.lib.data.context}, static_cast<int>(file.shape(kTokenTable).at(0))};
}

data::Tokenizer saved_tokenizer(const SavedModel& saved, int64_t vocab, const std::string& tokenizer_path) {
  const auto check_vocab = [&](data::Tokenizer tokenizer, const std::string& origin) {
    if (tokenizer.vocab_size() != vocab)
      throw InputError(str_cat(origin, " has ", tokenizer.vocab_size(), " tokens but the model in '", saved.parameters,
                               "' reads ", vocab),
                       ExitCode::kUsage);
    return tokenizer;
  };
  if (!tokenizer_path.empty())
    return check_vocab(data::Tokenizer::load_sentencepiece(tokenizer_path), str_cat("--tokenizer '", tokenizer_path, "'"));
  if (!saved.tokenizer_model.empty())
    return check_vocab(data::Tokenizer::load_sentencepiece(saved.tokenizer_model),
                       str_cat("'", saved.tokenizer_model, "'"));
  // Sharded token files name one tokenizer (loading them checks that they agree): the first's.
  const std::string train = saved.lib.data.train.empty() ? "" : data::first_shard(saved.lib.data.train);
  if (train.empty() || !fs::exists(train)) {
    if (vocab <= data::kByteVocabulary) return data::Tokenizer::bytes();
    if (train.empty())  // an export without its directory's tokenizer.model
      throw InputError(str_cat("the model in '", saved.parameters, "' reads ", vocab,
                               " tokens and names no tokenizer file; pass its tokenizer.model with --tokenizer"),
                       ExitCode::kUsage);
    throw InputError(str_cat("the model in '", saved.parameters, "' reads ", vocab, " tokens and its data.train '", train,
                             "' (which names the tokenizer) does not exist; pass the run's tokenizer.model with "
                             "--tokenizer"),
                     ExitCode::kUsage);
  }
  const data::TokenFileInfo info = data::describe_token_file(train);
  // A byte model may read fewer than 256 tokens (a file of a smaller alphabet); the caller
  // checks that the prompt's bytes lie in its vocabulary.
  if (info.tokenizer == data::kByteTokenizer) return data::Tokenizer::bytes();
  const std::string model = (fs::path(train).parent_path() / info.tokenizer_model).string();
  if (!fs::exists(model))
    throw InputError(str_cat("data.train '", train, "' names the tokenizer model '", model,
                             "', which does not exist; pass it with --tokenizer"),
                     ExitCode::kUsage);
  data::Tokenizer tokenizer = data::Tokenizer::load_sentencepiece(model);
  if (tokenizer.model_sha256() != info.tokenizer_sha256)
    throw InputError(str_cat("'", model, "' has sha256 ", tokenizer.model_sha256(), " but data.train '", train,
                             "' was encoded with sha256 ", info.tokenizer_sha256,
                             " (the model was replaced); pass the run's own with --tokenizer"),
                     ExitCode::kUsage);
  return check_vocab(std::move(tokenizer), str_cat("'", model, "'"));
}

nn::Model load_saved_model(const SavedModel& saved, const config::ModelInputs& inputs) {
  nn::Model model = config::build_model(saved.lib.model, inputs.sample_shape, inputs.num_classes);
  model.build(inputs.sample_shape);
  load_parameters_into(saved, model.parameters());
  return model;
}

distribute::DistributedModel load_saved_model(const SavedModel& saved, const config::ModelInputs& inputs,
                                              distribute::MirroredStrategy& strategy) {
  auto model =
      strategy.scope([&] { return config::build_model(saved.lib.model, inputs.sample_shape, inputs.num_classes); },
                     {inputs.sample_shape, saved.config.seed});
  nn::ParameterArena& arena = model.parameters();
  if (strategy.is_chief()) load_parameters_into(saved, arena);
  // The running statistics too: a replica that kept its initial ones would evaluate another model.
  for (Tensor* values : {&arena.flat_params(), &arena.flat_buffers()})
    if (values->defined() && values->numel() > 0)
      strategy.communicator().broadcast(values->data<float>(), static_cast<size_t>(values->numel()), 0);
  return model;
}

}  // namespace mirrored::checkpoint
