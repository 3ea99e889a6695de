#include "mirrored/checkpoint/init_from.h"

#include "mirrored/checkpoint/gpt2_weights.h"
#include "mirrored/checkpoint/model_directory.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored::checkpoint {

void take_shape_from_init_from(config::TrainConfig& config) {
  if (config.init_from.empty() || config.model != config::ModelKind::kGpt) return;
  std::string file;
  nn::GptSpec spec;
  try {  // the file's own problems (missing, truncated, mislabelled) as init_from's
    file = model_file_in(config.init_from);
    if (!io::SafetensorsFile(file).metadata().count("n_layer")) return;
    spec = gpt2_spec_of(file);
  } catch (const InputError& e) {
    throw InputError(str_cat("init_from: ", e.what()), ExitCode::kCheckpoint);
  }
  struct Field {
    const char* key;       // the configuration's
    const char* file_key;  // GPT2Config's
    int64_t config::TrainConfig::*field;
    int64_t value;
  };
  for (const Field& f : {Field{"gpt.layers", "n_layer", &config::TrainConfig::gpt_layers, spec.layers},
                         Field{"gpt.heads", "n_head", &config::TrainConfig::gpt_heads, spec.heads},
                         Field{"gpt.width", "n_embd", &config::TrainConfig::gpt_width, spec.width},
                         Field{"gpt.context", "n_positions", &config::TrainConfig::gpt_context, spec.context}}) {
    if (config.given_keys.count(f.key) && config.*f.field != f.value)
      throw InputError(str_cat("init_from: '", file, "' holds a gpt with ", f.file_key, " = ", f.value, ", but ", f.key,
                               " = ", config.*f.field, " was given; leave ", f.key,
                               " out to take the file's shape, or give ", f.value),
                       ExitCode::kCheckpoint);
    config.*f.field = f.value;
  }
}

void initialize_from_file(const config::TrainConfig& config, distribute::MirroredStrategy& strategy,
                          distribute::DistributedModel& model) {
  comm::Communicator& comm = strategy.communicator();
  nn::ParameterArena& arena = model.parameters();
  std::vector<float> values;
  // A setting every rank sees alike: a configuration error, before any file is read.
  if (config.model != config::ModelKind::kGpt)
    throw InputError(str_cat("init_from: model = ", config::model_kind_name(config.model),
                             ": init_from takes a gpt's safetensors (GPT-2's layout), so it initialises a gpt only"),
                     ExitCode::kUsage);
  std::string problem;
  if (strategy.is_chief()) {
    try {
      values = read_gpt2_parameters(io::SafetensorsFile(model_file_in(config.init_from)), arena);
    } catch (const InputError& e) {
      problem = e.what();
    }
  }
  // Every rank learns of a bad file and exits; none waits in the broadcast below.
  problem = comm.broadcast_string(problem, 0);
  if (!problem.empty()) throw InputError(str_cat("init_from: ", problem), ExitCode::kCheckpoint);
  Tensor& params = arena.flat_params();
  values.resize(static_cast<size_t>(params.numel()));
  comm.broadcast(values.data(), values.size(), 0);
  kernels::copy(Tensor::from(values, params.shape()), params);
  if (strategy.is_chief())
    chief_info(str_cat("initial parameters from '", config.init_from, "' (", arena.size(), " tensors)"));
}

}  // namespace mirrored::checkpoint
