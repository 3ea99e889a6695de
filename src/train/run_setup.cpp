#include "mirrored/train/run_setup.h"

#include <algorithm>
#include <thread>

#include "mirrored/core/error.h"
#include "mirrored/data/hdf5_dataset.h"

namespace mirrored::train {

int threads_per_rank(const TrainConfig& config, const distribute::Cluster& cluster) {
  if (config.threads > 0) return static_cast<int>(config.threads);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, cluster.local_size()));
}

std::shared_ptr<const data::Dataset> load_dataset(const std::string& path) {
  return std::make_shared<const data::Dataset>(data::load_hdf5_dataset(path));
}

distribute::DatasetOptions training_data_options(const TrainConfig& config, const Shape& sample_shape) {
  if (config.augment_crop_padding > 0) {
    const int64_t smaller_side = std::min(sample_shape[1], sample_shape[2]);
    if (config.augment_crop_padding >= smaller_side)  // the shift would leave nothing of the image
      throw InputError(str_cat("augment.crop_padding = ", config.augment_crop_padding, ": expected less than ",
                               smaller_side, ", the smaller side of the ", shape_str(sample_shape),
                               " images in data.train '", config.train_data, "'"),
                       ExitCode::kUsage);
  }
  distribute::DatasetOptions options;
  options.global_batch = config.batch_size;
  options.seed = config.seed;
  options.shuffle = true;
  options.augment = {config.augment_flip, config.augment_crop_padding};
  return options;
}

}  // namespace mirrored::train
