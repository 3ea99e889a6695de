#include "mirrored/distribute/gradient_reducer.h"

namespace mirrored::distribute {

GradientReducer::GradientReducer(nn::ParameterArena& arena, comm::Communicator& comm)
    : arena_(arena), comm_(comm) {}

void GradientReducer::on_layer_ready(size_t /*layer_index*/) {}

void GradientReducer::finish() {
  Tensor& grads = arena_.flat_grads();
  comm_.allreduce(grads.data<float>(), static_cast<size_t>(grads.numel()), comm::ReduceOp::kMean);
}

}  // namespace mirrored::distribute
