#pragma once
// The safetensors format (Hugging Face's): an 8-byte little-endian header length N, N bytes
// of JSON naming each tensor's dtype, shape and [begin, end) byte range in the data that
// follows, and an optional "__metadata__" object of string values. mirrored writes float32
// tensors and reads F32, F16 and BF16 ones as float32.
#include <cstdint>
#include <map>
#include <memory>
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
  // its dtype and shape (element counts and byte sizes checked for overflow), and the ranges
  // tile the data exactly, as Hugging Face's reader asks: none overlaps another, none leaves
  // a gap. InputError naming the file (and the tensor) otherwise: a truncated file, a header
  // that is not the format's JSON (io/json_text.h's strict rules), a dtype mirrored cannot
  // read, a shape of more than 64 dimensions. Memory: at most 6 bytes per header byte, the
  // header included (which is at most 100 MiB and the file's size).
  // The file stays open: read() reads through the descriptor checked here.
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
  void check_layout(uint64_t data_size) const;

  std::string path_;
  std::shared_ptr<const int> fd_;  // the open file (shared by copies), closed with the last
  uint64_t data_start_ = 0;
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace mirrored::io
