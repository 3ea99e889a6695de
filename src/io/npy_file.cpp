#include "mirrored/io/npy_file.h"

#include <cstdint>

#include "mirrored/core/error.h"
#include "mirrored/core/file_replacement.h"

namespace mirrored::io {

void write_npy_f32(const std::string& path, const std::vector<float>& values, int64_t rows, int64_t cols) {
  MIRRORED_CHECK(static_cast<int64_t>(values.size()) == rows * cols, values.size(), " values for [", rows, ", ", cols,
                 "]");
  std::string header = str_cat("{'descr': '<f4', 'fortran_order': False, 'shape': (", rows, ", ", cols, "), }");
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  // Whole or not at all, never through a planted symlink (core/file_replacement.h).
  FileReplacement out(path);
  const auto length = static_cast<uint16_t>(header.size());
  out.write("\x93NUMPY\x01\x00", 8);
  out.write(&length, 2);
  out.write(header);
  out.write(values.data(), values.size() * sizeof(float));
  out.commit();
}

}  // namespace mirrored::io
