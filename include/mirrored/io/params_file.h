#pragma once
// Model parameters as an HDF5 file: one float32 dataset per parameter, named as in the
// arena ("/params/0.linear.weight"); the arena's buffers (batch norm running statistics,
// "/params/1.batchnorm.running_mean") are stored the same way. This is final.h5.
#include <string>

#include "mirrored/nn/parameter_arena.h"

namespace mirrored::io {

// Writes (or replaces) `path` whole or not at all (io::write_hdf5_file: Error(kWriteFailed)
// leaves an existing file unchanged).
void save_parameters(const std::string& path, const nn::ParameterArena& arena);
// Loads into an allocated arena; InputError naming the file and parameter on a missing
// dataset or a shape mismatch, with ExitCode::kCheckpoint (a file of another model).
void load_parameters(const std::string& path, nn::ParameterArena& arena);

}  // namespace mirrored::io
