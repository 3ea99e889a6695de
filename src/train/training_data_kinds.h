#pragma once
// The two kinds of TrainingData (training_data.h); load_training_data picks one.
#include <memory>

#include "mirrored/train/training_data.h"

namespace mirrored::train {

std::unique_ptr<TrainingData> image_training_data(const config::LibraryOptions& lib,
                                                  distribute::MirroredStrategy& strategy, bool with_eval,
                                                  LoadedDatasets& datasets);
std::unique_ptr<TrainingData> token_training_data(const config::LibraryOptions& lib,
                                                  distribute::MirroredStrategy& strategy, bool with_eval,
                                                  LoadedDatasets& datasets);

}  // namespace mirrored::train
