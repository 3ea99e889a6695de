#pragma once
// The on-disk dataset format: an HDF5 file with
//   /images  uint8 [N, H, W] or [N, C, H, W]
//   /labels  uint8 [N]       (any integer type is accepted on read)
// and an optional attribute num_classes on the root group (default 10).
#include <cstdint>
#include <string>

#include "mirrored/data/dataset.h"

namespace mirrored::data {

// Reads and validates the whole file. Every problem is an InputError naming the file, the
// dataset and what was expected: missing file, not HDF5, missing /images or /labels, wrong
// rank, N mismatch, empty, labels outside [0, num_classes), pixels outside their range.
// Pixels that would take more than `cache_bytes` in memory (1 byte per integer pixel, 4 per
// float one) are validated block by block and then read on demand through an ImageCache
// bounded by `cache_bytes` (Dataset::cache); smaller files, or any file with `cache_bytes`
// 0, are loaded whole. Batches have the same bits either way.
Dataset load_hdf5_dataset(const std::string& path, int64_t cache_bytes = 0);
// Writes (or replaces) `path` whole or not at all (io::write_hdf5_file).
void write_hdf5_dataset(const std::string& path, const Dataset& dataset);

}  // namespace mirrored::data
