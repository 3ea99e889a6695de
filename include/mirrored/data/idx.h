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
// The same, written as shards of at most `shard_bytes` bytes of samples (write_hdf5_shards;
// 0: one file). Returns the paths written, in order.
struct ImportedShards {
  int64_t samples = 0;
  std::vector<std::string> paths;
};
ImportedShards import_idx_shards(const std::string& images_path, const std::string& labels_path,
                                           const std::string& out_path, int64_t shard_bytes);

}  // namespace mirrored::data
