#include "mirrored/train/optimizer_factory.h"

namespace mirrored::train {

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& config, nn::ParameterArena& arena) {
  if (config.optimizer == "sgd") {
    return std::make_unique<optim::Sgd>(
        arena, kernels::SgdHyper{static_cast<float>(config.lr), static_cast<float>(config.momentum),
                                 static_cast<float>(config.weight_decay), false});
  }
  kernels::AdamHyper hyper;
  hyper.lr = static_cast<float>(config.lr);
  hyper.beta1 = static_cast<float>(config.beta1);
  hyper.beta2 = static_cast<float>(config.beta2);
  hyper.eps = static_cast<float>(config.eps);
  hyper.weight_decay = static_cast<float>(config.weight_decay);
  hyper.decoupled_weight_decay = config.optimizer == "adamw";
  return std::make_unique<optim::Adam>(arena, hyper);
}

}  // namespace mirrored::train
