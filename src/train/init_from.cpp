#include "mirrored/train/init_from.h"

#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/train/gpt2_weights.h"

namespace mirrored::train {

void initialize_from_file(TrainContext& ctx) {
  comm::Communicator& comm = ctx.strategy.communicator();
  nn::ParameterArena& arena = ctx.model.parameters();
  std::vector<float> values;
  std::string problem;
  if (ctx.strategy.is_chief()) {
    try {
      if (ctx.config.model != ModelKind::kGpt)
        throw InputError(str_cat("model = ", model_kind_name(ctx.config.model), ": a safetensors file in GPT-2's layout "
                                 "initialises a gpt only"));
      values = read_gpt2_parameters(io::SafetensorsFile(ctx.config.init_from), arena);
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
  if (ctx.strategy.is_chief())
    chief_info(str_cat("initial parameters from '", ctx.config.init_from, "' (", arena.size(), " tensors)"));
}

}  // namespace mirrored::train
