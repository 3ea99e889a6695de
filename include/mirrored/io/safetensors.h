#pragma once
// The safetensors format (Hugging Face's): an 8-byte little-endian header length N, N bytes
// of JSON naming each tensor's dtype, shape and [begin, end) byte range in the data that
// follows, and an optional "__metadata__" object of string values. mirrored writes float32
// tensors and reads F32, F16 and BF16 ones as float32.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mirrored::io {

struct SafetensorsTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;  // row-major, prod(shape) of them
};

// Writes the tensors in the order given, through a temporary name renamed into place.
void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata);

class SafetensorsFile {
 public:
  // Reads and checks the header: every tensor's byte range lies inside the file and matches
  // its dtype and shape. InputError naming the file (and the tensor) otherwise: a truncated
  // file, a header that is not the format's JSON, a dtype mirrored cannot read.
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  std::vector<std::string> names() const;  // in the order of their data
  bool contains(const std::string& name) const { return entries_.count(name) > 0; }
  const std::vector<int64_t>& shape(const std::string& name) const;
  // The tensor as float32 values, row-major.
  std::vector<float> read(const std::string& name) const;

 private:
  struct Entry {
    std::string dtype;
    std::vector<int64_t> shape;
    uint64_t begin = 0, end = 0;  // into the data, after the header
  };
  const Entry& entry(const std::string& name) const;

  std::string path_;
  uint64_t data_start_ = 0;
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace mirrored::io
