#pragma once
// Set-up steps of a run that need the machine or the data, not only the configuration.
#include <memory>
#include <string>

#include "mirrored/data/augment.h"
#include "mirrored/data/dataset.h"
#include "mirrored/runtime/cluster.h"

namespace mirrored::config {

// `threads` from the config, or (0) the host's cores shared evenly by its ranks; never more
// than the CPUs this rank may run on (a larger `threads` is capped there, with a warning).
int threads_per_rank(int64_t threads, const runtime::Cluster& cluster);
// A process alone (bench layers): `threads`, or (0) every CPU it may run on; capped there.
int threads_for_one_process(int64_t threads);

// An HDF5 dataset file: loaded whole when its pixels fit in `cache_mb` MiB (or cache_mb is
// 0), else read on demand through a block cache of that size (data.cache_mb).
std::shared_ptr<const data::Dataset> load_dataset(const std::string& path, int64_t cache_mb);

// Throws InputError(kUsage) when augment.crop_padding is not smaller than the images of
// `path` (the shift would leave nothing of them).
void check_augment_fits(const data::AugmentOptions& augment, const Shape& sample_shape, const std::string& path);

}  // namespace mirrored::config
