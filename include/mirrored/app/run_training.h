#pragma once
// `mirrored train` as an application of the training loop (train/trainer.h): the Trainer
// with the standard callbacks (metrics, TensorBoard, progress, console, final parameters,
// checkpoints, preemption) plus `extra` ones, run by the owner of membership
// (elastic/elastic_run.h), which goes on with a new Trainer after a lost rank under
// on_failure = shrink. Composition only: every decision is the Trainer's or the owner's.
#include <memory>
#include <vector>

#include "mirrored/config/config.h"
#include "mirrored/runtime/runtime.h"
#include "mirrored/train/callback.h"

namespace mirrored::app {

train::TrainSummary run_training(const config::TrainConfig& config, runtime::Runtime& runtime,
                                 std::vector<std::unique_ptr<train::Callback>> extra = {});

}  // namespace mirrored::app
