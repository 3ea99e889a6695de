#pragma once
// The training loop behind `mirrored train`, written against the strategy API a library
// user would use for a custom loop. Everything around the loop is a Callback.
#include <memory>
#include <vector>

#include "mirrored/distribute/runtime.h"
#include "mirrored/train/callback.h"
#include "mirrored/train/config.h"

namespace mirrored::train {

// Runs the configured training with the standard callbacks plus `extra` ones.
TrainSummary run_training(const TrainConfig& config, distribute::Runtime& runtime,
                          std::vector<std::unique_ptr<Callback>> extra = {});

}  // namespace mirrored::train
