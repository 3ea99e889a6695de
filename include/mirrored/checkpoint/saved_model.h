#pragma once
// A trained model as every command that reads one finds it (`mirrored eval`, `generate`):
// the file with its parameters, and the run's configuration that names the architecture.
// The parameters live in a checkpoint (checkpoints/ckpt-*.h5, which also stores the run's
// resolved configuration) or in a parameter file (final.h5, whose configuration is the
// config.ini the run wrote next to it); --config overrides either. A model exported to
// safetensors (a model directory, or one .safetensors file: checkpoint/model_directory.h)
// is read too: its GPT-2 shape from the file's metadata, its tokenizer from the directory's
// tokenizer.model.
#include <string>

#include "mirrored/config/config.h"
#include "mirrored/config/library_options.h"
#include "mirrored/config/model_factory.h"
#include "mirrored/data/tokenizer.h"
#include "mirrored/distribute/strategy.h"
#include "mirrored/nn/model.h"

namespace mirrored::checkpoint {

struct SavedModel {
  std::string parameters;     // the checkpoint or parameter file the parameters are read from
  config::TrainConfig config;         // the configuration of the run that wrote them
  std::string config_origin;  // how messages name it: "'runs/a/config.ini'", "the configuration stored in '...'"
  config::LibraryOptions lib;         // library_options(config)
  bool safetensors = false;           // parameters in GPT-2's layout (an export), not HDF5
  std::string tokenizer_model;        // a model directory's tokenizer.model, when it has one
};

// `path`: a checkpoint, a parameter file, a run directory (its final.h5), a model directory
// or a .safetensors file. `config_path`:
// the run's config.ini; empty for a checkpoint's own configuration, or the config.ini next
// to a parameter file. Errors begin with `command` and exit with kCheckpoint for a missing
// parameter file, kUsage for a missing configuration.
SavedModel find_saved_model(const std::string& command, const std::string& path, const std::string& config_path);

// A gpt's inputs from its saved parameters alone (the token table's rows are the
// vocabulary), for a command that has no data file to ask.
config::ModelInputs saved_token_model_inputs(const SavedModel& saved);

// The tokenizer a gpt of `vocab` tokens was trained with: `tokenizer_path` (a SentencePiece
// .model) when given, else the one data.train names (its tokenizer_model next to it, which
// must still have the SHA-256 the file recorded), else bytes for a vocabulary of at most
// 256 when data.train is gone. InputError (kUsage) naming what does not fit.
data::Tokenizer saved_tokenizer(const SavedModel& saved, int64_t vocab, const std::string& tokenizer_path);

// The model built for `inputs`, holding the saved parameters, on this process alone.
nn::Model load_saved_model(const SavedModel& saved, const config::ModelInputs& inputs);
// Collective. The same model mirrored on every replica: the chief reads the file and
// broadcasts it, as for training's initial parameters, so the other nodes need not see
// the same file system.
distribute::DistributedModel load_saved_model(const SavedModel& saved, const config::ModelInputs& inputs,
                                              distribute::MirroredStrategy& strategy);

}  // namespace mirrored::checkpoint
