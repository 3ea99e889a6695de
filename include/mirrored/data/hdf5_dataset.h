#pragma once
// The on-disk dataset format: an HDF5 file with
//   /images  uint8 [N, H, W] or [N, C, H, W]
//   /labels  uint8 [N]       (any integer type is accepted on read)
// and an optional attribute num_classes on the root group (default 10).
#include <cstdint>
#include <string>
#include <vector>

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
// Writes (or replaces) `path` whole or not at all (io::write_hdf5_file). `compress`: pixels
// deflated in chunks of whole samples (small for MNIST-like images; photographs shrink by a
// quarter at most, for a write several times slower than their decoding).
void write_hdf5_dataset(const std::string& path, const Dataset& dataset, bool compress = true);

// Writes `dataset` as shards of at most `shard_bytes` bytes of samples each (pixels and
// label; at least one sample a shard), each whole or not at all. One shard is `path`
// itself; more are named like TensorFlow's: `path` train.h5 gives train-00000-of-00004.h5
// and on. Returns the paths written, in order (read back as one set through a list or a
// glob, shard_list.h). `shard_bytes` 0: one file.
std::vector<std::string> write_hdf5_shards(const std::string& path, const Dataset& dataset, int64_t shard_bytes);

// The name of shard `index` of `count` for `path` (as above).
std::string shard_name(const std::string& path, int64_t index, int64_t count);

}  // namespace mirrored::data
