#pragma once
// Set-up shared by the training loop and `mirrored bench train`.
#include <memory>
#include <string>

#include "mirrored/data/dataset.h"
#include "mirrored/distribute/cluster.h"
#include "mirrored/distribute/distributed_dataset.h"
#include "mirrored/train/config.h"

namespace mirrored::train {

// `threads` from the config, or (0) the host's cores shared evenly by its ranks.
int threads_per_rank(const TrainConfig& config, const distribute::Cluster& cluster);

// An HDF5 dataset file, loaded whole.
std::shared_ptr<const data::Dataset> load_dataset(const std::string& path);

// How the training set is sharded, shuffled and augmented. Throws InputError(kUsage) when
// augment.crop_padding is not smaller than the images.
distribute::DatasetOptions training_data_options(const TrainConfig& config, const Shape& sample_shape);

}  // namespace mirrored::train
