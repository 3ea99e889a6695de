#include "mirrored/distribute/distributed_model.h"

namespace mirrored::distribute {

DistributedModel::DistributedModel(std::unique_ptr<nn::Model> model, comm::Communicator& comm)
    : model_(std::move(model)), reducer_(std::make_unique<GradientReducer>(model_->parameters(), comm)) {}

void DistributedModel::backward(const Tensor& dloss_dout) {
  model_->backward(dloss_dout, [this](size_t layer) { reducer_->on_layer_ready(layer); });
}

}  // namespace mirrored::distribute
