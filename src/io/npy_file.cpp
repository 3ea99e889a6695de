#include "mirrored/io/npy_file.h"

#include <fstream>

#include "mirrored/core/error.h"

namespace mirrored::io {

void write_npy_f32(const std::string& path, const std::vector<float>& values, int64_t rows, int64_t cols) {
  MIRRORED_CHECK(static_cast<int64_t>(values.size()) == rows * cols, values.size(), " values for [", rows, ", ", cols,
                 "]");
  std::string header = str_cat("{'descr': '<f4', 'fortran_order': False, 'shape': (", rows, ", ", cols, "), }");
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw InputError(str_cat("cannot open '", path, "' for writing"), ExitCode::kUsage);
  const auto length = static_cast<uint16_t>(header.size());
  out.write("\x93NUMPY\x01\x00", 8);
  out.write(reinterpret_cast<const char*>(&length), 2);
  out << header;
  out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)));
  if (!out.flush()) throw Error(ExitCode::kFailure, str_cat("cannot write '", path, "'"));
}

}  // namespace mirrored::io
