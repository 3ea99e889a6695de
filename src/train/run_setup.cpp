#include "mirrored/train/run_setup.h"

#include <algorithm>
#include <thread>

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

}  // namespace mirrored::train
