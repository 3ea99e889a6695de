#pragma once
#include <cstdint>

#include "mirrored/distribute/strategy.h"

namespace mirrored::train {

struct EvalResult {
  double loss = 0.0;      // mean over every sample of the set
  double accuracy = 0.0;
  int64_t samples = 0;    // every sample once, summed over replicas
};

// Data-parallel evaluation: each replica scores its share, then sums are reduced.
EvalResult evaluate(distribute::MirroredStrategy& strategy, distribute::DistributedModel& model,
                    distribute::EvalDataset& data);

}  // namespace mirrored::train
