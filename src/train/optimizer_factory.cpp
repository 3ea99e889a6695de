#include "mirrored/train/optimizer_factory.h"

#include <cmath>

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

optim::LrSchedule make_lr_schedule(const TrainConfig& config, int64_t steps_per_epoch) {
  optim::LrScheduleSpec spec;
  spec.kind = optim::lr_schedule_kind(config.lr_schedule);
  spec.base_lr = config.lr;
  spec.warmup_steps = std::llround(config.lr_warmup_epochs * static_cast<double>(steps_per_epoch));
  spec.total_steps = config.epochs * steps_per_epoch;
  spec.min_lr = config.lr_min;
  for (const int64_t epoch : config.lr_milestones) spec.milestones.push_back(epoch * steps_per_epoch);
  spec.gamma = config.lr_gamma;
  return optim::LrSchedule(std::move(spec));
}

}  // namespace mirrored::train
