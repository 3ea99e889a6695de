#pragma once
// Set-up shared by the training loop and `mirrored bench train`.
#include <memory>
#include <string>

#include "mirrored/data/dataset.h"
#include "mirrored/distribute/cluster.h"
#include "mirrored/train/config.h"

namespace mirrored::train {

// `threads` from the config, or (0) the host's cores shared evenly by its ranks.
int threads_per_rank(const TrainConfig& config, const distribute::Cluster& cluster);

// An HDF5 dataset file, loaded whole.
std::shared_ptr<const data::Dataset> load_dataset(const std::string& path);

}  // namespace mirrored::train
