#include "mirrored/train/saved_model.h"

#include <filesystem>

#include "mirrored/core/error.h"
#include "mirrored/io/checkpoint_file.h"
#include "mirrored/io/hdf5.h"
#include "mirrored/io/params_file.h"
#include "mirrored/train/model_factory.h"

namespace mirrored::train {
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

}  // namespace

SavedModel find_saved_model(const std::string& command, const std::string& path, const std::string& config_path) {
  SavedModel saved;
  saved.parameters = parameters_in(command, path);
  if (config_path.empty() && is_checkpoint_file(saved.parameters)) {
    saved.config_origin = str_cat("the configuration stored in '", saved.parameters, "'");
    saved.config = parse_config_text(io::read_checkpoint(saved.parameters).config, saved.config_origin,
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
    saved.config = parse_train_config({"--config", ini});
  }
  saved.lib = library_options(saved.config);
  return saved;
}

ModelInputs saved_token_model_inputs(const SavedModel& saved) {
  MIRRORED_CHECK(saved.lib.model.kind == ModelKind::kGpt, "token inputs of a ", model_kind_name(saved.lib.model.kind));
  const io::H5File file(saved.parameters, io::H5File::Access::kRead);
  if (!file.exists(kTokenTable))
    throw InputError(str_cat("'", saved.parameters, "' has no ", kTokenTable, ", the token table of the gpt that ",
                             saved.config_origin, " names (a file of another model?)"),
                     ExitCode::kCheckpoint);
  return {{saved.lib.data.context}, static_cast<int>(file.shape(kTokenTable).at(0))};
}

nn::Model load_saved_model(const SavedModel& saved, const ModelInputs& inputs) {
  nn::Model model = build_model(saved.lib.model, inputs.sample_shape, inputs.num_classes);
  model.build(inputs.sample_shape);
  io::load_parameters(saved.parameters, model.parameters());
  return model;
}

distribute::DistributedModel load_saved_model(const SavedModel& saved, const ModelInputs& inputs,
                                              distribute::MirroredStrategy& strategy) {
  auto model = strategy.scope([&] { return build_model(saved.lib.model, inputs.sample_shape, inputs.num_classes); },
                              {inputs.sample_shape, saved.config.seed});
  nn::ParameterArena& arena = model.parameters();
  if (strategy.is_chief()) io::load_parameters(saved.parameters, arena);
  // The running statistics too: a replica that kept its initial ones would evaluate another model.
  for (Tensor* values : {&arena.flat_params(), &arena.flat_buffers()})
    if (values->defined() && values->numel() > 0)
      strategy.communicator().broadcast(values->data<float>(), static_cast<size_t>(values->numel()), 0);
  return model;
}

}  // namespace mirrored::train
