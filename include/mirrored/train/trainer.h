#pragma once
// The training loop behind `mirrored train`, written against the strategy API a library
// user would use for a custom loop.
#include <cstdint>

#include "mirrored/distribute/runtime.h"
#include "mirrored/train/config.h"

namespace mirrored::train {

struct TrainSummary {
  int64_t steps = 0;
  double final_test_loss = 0.0;
  double final_test_accuracy = 0.0;
  double samples_per_sec = 0.0;   // all replicas, step 0 of the run excluded
};

TrainSummary run_training(const TrainConfig& config, distribute::Runtime& runtime);

}  // namespace mirrored::train
