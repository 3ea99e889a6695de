#pragma once
// The on-disk dataset format: an HDF5 file with
//   /images  uint8 [N, H, W] or [N, C, H, W]
//   /labels  uint8 [N]       (any integer type is accepted on read)
// and an optional attribute num_classes on the root group (default 10).
#include <string>

#include "mirrored/data/dataset.h"

namespace mirrored::data {

// Reads and validates the whole file. Every problem is an InputError naming the file, the
// dataset and what was expected: missing file, not HDF5, missing /images or /labels, wrong
// rank, N mismatch, empty, labels outside [0, num_classes).
Dataset load_hdf5_dataset(const std::string& path);
void write_hdf5_dataset(const std::string& path, const Dataset& dataset);

}  // namespace mirrored::data
