#include "mirrored/config/run_setup.h"

#include <algorithm>
#include <thread>

#include "mirrored/core/cpu_affinity.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/data/hdf5_dataset.h"

namespace mirrored::config {

namespace {

// The CPUs this process may run on: its own cores once the runtime has bound the rank
// (bind_cores), else what the launcher, a cgroup or taskset left it. More threads than that
// only queue on the same CPUs, and a typo (100000) would start that many.
int allowed_cpu_count() { return static_cast<int>(std::max<size_t>(1, allowed_cpus().size())); }

int capped(int64_t threads, int allowed, bool warn, const std::string& who) {
  if (threads <= allowed) return static_cast<int>(threads);
  if (warn)
    rank_warning(str_cat("threads = ", threads, " is more than the ", allowed, " CPU(s) ", who, "; using ", allowed));
  return allowed;
}

}  // namespace

int threads_per_rank(int64_t threads, const runtime::Cluster& cluster) {
  const int allowed = allowed_cpu_count();
  if (threads > 0)
    return capped(threads, allowed, cluster.local_rank() == 0, str_cat("a rank may use on ", cluster.host()));
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, std::min(allowed, cores / std::max(1, cluster.local_size())));
}

int threads_for_one_process(int64_t threads) {
  const int allowed = allowed_cpu_count();
  return threads > 0 ? capped(threads, allowed, true, "this process may use") : allowed;
}

std::shared_ptr<const data::Dataset> load_dataset(const std::string& path, int64_t cache_mb) {
  if (cache_mb < 0)
    throw InputError(str_cat("data.cache_mb = ", cache_mb, ", expected 0 (no bound) or a size in MiB"),
                     ExitCode::kUsage);
  return std::make_shared<const data::Dataset>(data::load_hdf5_dataset(path, cache_mb << 20));
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

}  // namespace mirrored::config
