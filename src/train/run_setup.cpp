#include "mirrored/train/run_setup.h"

#include <algorithm>
#include <thread>

#include "mirrored/core/error.h"
#include "mirrored/data/hdf5_dataset.h"

namespace mirrored::train {

int threads_per_rank(int64_t threads, const distribute::Cluster& cluster) {
  if (threads > 0) return static_cast<int>(threads);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, cluster.local_size()));
}

std::shared_ptr<const data::Dataset> load_dataset(const std::string& path) {
  return std::make_shared<const data::Dataset>(data::load_hdf5_dataset(path));
}

void check_augment_fits(const data::AugmentOptions& augment, const Shape& sample_shape, const std::string& path) {
  if (augment.crop_padding <= 0) return;
  const int64_t smaller_side = std::min(sample_shape[1], sample_shape[2]);
  if (augment.crop_padding >= smaller_side)
    throw InputError(str_cat("augment.crop_padding = ", augment.crop_padding, ": expected less than ", smaller_side,
                             ", the smaller side of the ", shape_str(sample_shape), " images in data.train '", path,
                             "'"),
                     ExitCode::kUsage);
}

}  // namespace mirrored::train
