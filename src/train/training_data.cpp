#include "mirrored/train/training_data.h"

#include "training_data_kinds.h"

namespace mirrored::train {

std::unique_ptr<TrainingData> load_training_data(const config::LibraryOptions& lib,
                                                 distribute::MirroredStrategy& strategy, bool with_eval,
                                                 LoadedDatasets& datasets) {
  if (lib.model.kind == config::ModelKind::kGpt) return token_training_data(lib, strategy, with_eval, datasets);
  return image_training_data(lib, strategy, with_eval, datasets);
}

}  // namespace mirrored::train
