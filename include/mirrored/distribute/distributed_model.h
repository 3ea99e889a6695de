#pragma once
// A model replica whose gradients are averaged across replicas, like PyTorch's DDP module:
// backward() feeds the gradient reducer as layers finish; synchronize_gradients() waits
// until every gradient holds its mean over replicas. Created by MirroredStrategy::scope.
#include <memory>

#include "mirrored/distribute/gradient_reducer.h"
#include "mirrored/nn/model.h"

namespace mirrored::distribute {

class DistributedModel {
 public:
  DistributedModel(std::unique_ptr<nn::Model> model, comm::Communicator& comm);

  const Tensor& forward(const Tensor& x, nn::Mode mode) { return model_->forward(x, mode); }
  void zero_grad() { model_->parameters().zero_grads(); }
  void backward(const Tensor& dloss_dout);
  void synchronize_gradients() { reducer_->finish(); }

  nn::Model& module() { return *model_; }
  nn::ParameterArena& parameters() { return model_->parameters(); }
  const nn::ParameterArena& parameters() const { return model_->parameters(); }

 private:
  std::unique_ptr<nn::Model> model_;
  std::unique_ptr<GradientReducer> reducer_;
};

}  // namespace mirrored::distribute
