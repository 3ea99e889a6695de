#pragma once
// `mirrored train` as an application of the training loop (train/trainer.h): the Trainer
// with the standard callbacks (metrics, TensorBoard, progress, console, final parameters,
// checkpoints, preemption) plus `extra` ones.
#include <memory>
#include <vector>

#include "mirrored/config/config.h"
#include "mirrored/runtime/runtime.h"
#include "mirrored/train/callback.h"

namespace mirrored::app {

train::TrainSummary run_training(const config::TrainConfig& config, runtime::Runtime& runtime,
                                 std::vector<std::unique_ptr<train::Callback>> extra = {});

}  // namespace mirrored::app
