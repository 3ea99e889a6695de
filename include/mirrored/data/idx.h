#pragma once
// The IDX format of MNIST and Fashion-MNIST (gzip'd or plain), read through zlib.
#include <cstdint>
#include <string>
#include <vector>

namespace mirrored::data {

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> values;  // only unsigned-byte IDX (type 0x08) is supported
};

// InputError naming the file and what is wrong: missing, bad magic, unsupported type,
// truncated payload.
IdxArray read_idx(const std::string& path);
void write_idx(const std::string& path, const IdxArray& array, bool gzip);  // for tests

// images IDX [N, H, W] + labels IDX [N] -> HDF5 dataset file. Returns the sample count.
int64_t import_idx(const std::string& images_path, const std::string& labels_path,
                   const std::string& out_path);

}  // namespace mirrored::data
