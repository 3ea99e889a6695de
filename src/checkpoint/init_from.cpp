#include "mirrored/checkpoint/init_from.h"

#include "mirrored/checkpoint/gpt2_weights.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored::checkpoint {

void initialize_from_file(const config::TrainConfig& config, distribute::MirroredStrategy& strategy,
                          distribute::DistributedModel& model) {
  comm::Communicator& comm = strategy.communicator();
  nn::ParameterArena& arena = model.parameters();
  std::vector<float> values;
  std::string problem;
  if (strategy.is_chief()) {
    try {
      if (config.model != config::ModelKind::kGpt)
        throw InputError(str_cat("model = ", config::model_kind_name(config.model),
                                 ": a safetensors file in GPT-2's layout initialises a gpt only"));
      values = read_gpt2_parameters(io::SafetensorsFile(config.init_from), arena);
    } catch (const InputError& e) {
      problem = e.what();
    }
  }
  // Every rank learns of a bad file and exits; none waits in the broadcast below.
  problem = comm.broadcast_string(problem, 0);
  if (!problem.empty()) throw InputError(str_cat("init_from: ", problem), ExitCode::kUsage);
  Tensor& params = arena.flat_params();
  values.resize(static_cast<size_t>(params.numel()));
  comm.broadcast(values.data(), values.size(), 0);
  kernels::copy(Tensor::from(values, params.shape()), params);
  if (strategy.is_chief())
    chief_info(str_cat("initial parameters from '", config.init_from, "' (", arena.size(), " tensors)"));
}

}  // namespace mirrored::checkpoint
