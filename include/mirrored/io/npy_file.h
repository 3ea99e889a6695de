#pragma once
// NumPy's .npy format (version 1.0), for arrays another implementation reads with
// numpy.load: `mirrored generate --logits_out`.
#include <cstdint>
#include <string>
#include <vector>

namespace mirrored::io {

// float32 [rows, cols] (values.size() == rows x cols, row-major) as .npy: the magic, a
// header dict padded to a multiple of 64 bytes, then the values little-endian. Replaces the
// file whole or not at all (core/file_replacement.h): Error(ExitCode::kWriteFailed) naming
// it when it cannot be written.
void write_npy_f32(const std::string& path, const std::vector<float>& values, int64_t rows, int64_t cols);

}  // namespace mirrored::io
