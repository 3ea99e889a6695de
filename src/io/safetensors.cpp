#include "mirrored/io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "mirrored/core/error.h"
#include "mirrored/core/file_replacement.h"
#include "mirrored/core/tensor.h"
#include "mirrored/io/json_text.h"

namespace mirrored::io {
namespace {

// A header larger than this is not a tensor index (GPT-2 XL's is 40 kB).
constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", u);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

size_t dtype_bytes(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "F16" || dtype == "BF16") return 2;
  return 0;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits = 0;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exponent = 127 - 15 + 1;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        --exponent;
      }
      bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
    }
  } else {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  return std::bit_cast<float>(bits);
}

}  // namespace

void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : metadata) {
      header += str_cat(first ? "" : ",", json_string(key), ":", json_string(value));
      first = false;
    }
    header += "}";
  }
  uint64_t offset = 0;
  for (const SafetensorsTensor& tensor : tensors) {
    int64_t count = 1;
    std::string shape;
    for (const int64_t d : tensor.shape) {
      count *= d;
      shape += str_cat(shape.empty() ? "" : ",", d);
    }
    MIRRORED_CHECK(count == static_cast<int64_t>(tensor.values.size()), tensor.name, ": ", tensor.values.size(),
                   " values for shape [", shape, "]");
    const uint64_t bytes = static_cast<uint64_t>(count) * 4;
    header += str_cat(header.size() > 1 ? "," : "", json_string(tensor.name), ":{\"dtype\":\"F32\",\"shape\":[", shape,
                      "],\"data_offsets\":[", offset, ",", offset + bytes, "]}");
    offset += bytes;
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');  // the data starts 8-byte aligned

  static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");
  FileReplacement out(path);
  const uint64_t length = header.size();
  out.write(&length, 8);
  out.write(header);
  for (const SafetensorsTensor& tensor : tensors) out.write(tensor.values.data(), tensor.values.size() * sizeof(float));
  out.commit();
}

namespace {

// Reads `size` bytes at `offset` of `fd` (InputError naming `path` and `what` when the file
// is shorter: it changed after it was checked).
void read_exactly(int fd, uint64_t offset, void* out, uint64_t size, const std::string& path, const std::string& what) {
  auto* bytes = static_cast<char*>(out);
  uint64_t done = 0;
  while (done < size) {
    const ssize_t got = pread(fd, bytes + done, static_cast<size_t>(std::min<uint64_t>(size - done, 1 << 30)),
                              static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      throw InputError(str_cat("'", path, "': ", what, ": read error at byte ", offset + done,
                               got < 0 ? str_cat(" (", std::strerror(errno), ")") : " (the file changed while reading?)"));
    done += static_cast<uint64_t>(got);
  }
}

// What a header describes costs at most about 4 bytes per byte of its text: a dimension
// (8 bytes) takes at least 2 ("0,"), a tensor's entry (~200 bytes) at least 51, names and
// strings are held once; with the header itself, reading takes at most 6 bytes per header
// byte (test_input_bounds measures it), and the header is at most the file's size.
constexpr size_t kMaxDimensions = 64;
constexpr int kMaxDepth = 16;

class HeaderReader {
 public:
  HeaderReader(const std::string& header, const std::string& path)
      : path_(path), cursor_(header, [&header, &path](size_t position, const std::string& expected) {
          return str_cat("'", path, "': the safetensors header is not valid JSON at byte ", position, " of ",
                         header.size(), ": expected ", expected);
        }) {}

  // Calls tensor(name, dtype, shape, begin, end) for each tensor, metadata(key, value) for
  // each __metadata__ member.
  template <typename Tensor, typename Metadata>
  void read(Tensor&& tensor, Metadata&& metadata) {
    cursor_.expect('{');
    if (!cursor_.consume('}')) {
      do {
        const std::string name = cursor_.string();
        cursor_.expect(':');
        if (name == "__metadata__") read_metadata(metadata);
        else read_tensor(name, tensor);
      } while (cursor_.consume(','));
      cursor_.expect('}');
    }
    cursor_.skip_space();
    if (!cursor_.at_end()) cursor_.fail("the end of the header after its object");
  }

 private:
  template <typename Metadata>
  void read_metadata(Metadata& metadata) {
    cursor_.expect('{');
    if (cursor_.consume('}')) return;
    do {
      std::string key = cursor_.string();
      cursor_.expect(':');
      cursor_.skip_space();
      if (cursor_.peek() != '"') throw InputError(str_cat("'", path_, "': __metadata__.", key, " is not a string"));
      metadata(std::move(key), cursor_.string());
    } while (cursor_.consume(','));
    cursor_.expect('}');
  }

  template <typename Tensor>
  void read_tensor(const std::string& name, Tensor& tensor) {
    const auto bad = [&](const std::string& what) { return InputError(str_cat("'", path_, "': tensor ", name, ": ", what)); };
    const char* expected = "expected {\"dtype\": string, \"shape\": [integers], \"data_offsets\": [begin, end]}";
    cursor_.skip_space();
    if (cursor_.peek() != '{') throw bad(expected);
    cursor_.expect('{');
    std::string dtype;
    std::vector<int64_t> shape;
    std::vector<uint64_t> offsets;
    bool has_dtype = false, has_shape = false, has_offsets = false;
    if (!cursor_.consume('}')) {
      do {
        const std::string key = cursor_.string();
        cursor_.expect(':');
        cursor_.skip_space();
        if (key == "dtype") {
          if (cursor_.peek() != '"') throw bad(expected);
          dtype = cursor_.string();
          has_dtype = true;
        } else if (key == "shape") {
          has_shape = true;
          shape.clear();
          for_each_item([&] {
            if (shape.size() == kMaxDimensions) throw bad(str_cat("shape has more than ", kMaxDimensions, " dimensions"));
            shape.push_back(static_cast<int64_t>(cursor_.unsigned_integer(INT64_MAX)));
          }, expected, bad);
        } else if (key == "data_offsets") {
          has_offsets = true;
          offsets.clear();
          for_each_item([&] {
            if (offsets.size() == 2) throw bad(expected);
            offsets.push_back(cursor_.unsigned_integer());
          }, expected, bad);
        } else {
          cursor_.skip_value(kMaxDepth);  // another key (a newer format's): not ours to read
        }
      } while (cursor_.consume(','));
      cursor_.expect('}');
    }
    if (!has_dtype || !has_shape || !has_offsets || offsets.size() != 2) throw bad(expected);
    tensor(name, std::move(dtype), std::move(shape), offsets[0], offsets[1]);
  }

  template <typename Item, typename Bad>
  void for_each_item(Item&& item, const char* expected, Bad& bad) {
    if (cursor_.peek() != '[') throw bad(expected);
    cursor_.expect('[');
    if (cursor_.consume(']')) return;
    do {
      cursor_.skip_space();
      if (cursor_.peek() == '-' || (cursor_.peek() >= '0' && cursor_.peek() <= '9')) {
        item();
      } else {
        throw bad(expected);
      }
    } while (cursor_.consume(','));
    cursor_.expect(']');
  }

  const std::string& path_;
  JsonCursor cursor_;
};

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw InputError(str_cat("cannot open '", path, "': ", errno == ENOENT ? "no such file" : std::strerror(errno)));
  // The descriptor checked here is the one every tensor is read through (read()).
  fd_ = std::shared_ptr<const int>(new int(fd), [](const int* held) {
    ::close(*held);
    delete held;
  });
  struct stat info {};
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode))
    throw InputError(str_cat("cannot open '", path, "': not a regular file"));
  const auto file_size = static_cast<uint64_t>(info.st_size);
  if (file_size < 8)
    throw InputError(str_cat("'", path, "': ", file_size,
                             " bytes, truncated (expected a safetensors file: an 8-byte header length first)"));
  uint64_t header_size = 0;
  read_exactly(fd, 0, &header_size, 8, path, "the header length");
  if (header_size > kMaxHeaderBytes || header_size > file_size - 8)
    throw InputError(str_cat("'", path, "': the header length says ", header_size, " bytes but the file has ",
                             file_size - 8, " after it (truncated, or not a safetensors file)"));
  std::string header(header_size, '\0');
  read_exactly(fd, 8, header.data(), header_size, path, "the header");
  data_start_ = 8 + header_size;
  const uint64_t data_size = file_size - data_start_;

  HeaderReader(header, path).read(
      [&](const std::string& name, std::string dtype, std::vector<int64_t> shape, uint64_t begin, uint64_t end) {
        const auto bad = [&](const std::string& what) { return InputError(str_cat("'", path, "': tensor ", name, ": ", what)); };
        const size_t element = dtype_bytes(dtype);
        if (element == 0) throw bad(str_cat("dtype ", dtype, ", expected F32, F16 or BF16"));
        // Element count and byte size, checked for overflow: a shape cannot wrap to fit.
        uint64_t count = 1, bytes = 0;
        for (const int64_t d : shape)
          if (__builtin_mul_overflow(count, static_cast<uint64_t>(d), &count))
            throw bad(str_cat("shape ", shape_str(shape), " has more than 2^64 elements"));
        if (__builtin_mul_overflow(count, element, &bytes))
          throw bad(str_cat("dtype ", dtype, " shape ", shape_str(shape), " takes more than 2^64 bytes"));
        if (begin > end || end > data_size)
          throw bad(str_cat("data_offsets [", begin, ", ", end, ") reach beyond the ", data_size,
                            " bytes of data in the file (truncated?)"));
        if (end - begin != bytes)
          throw bad(str_cat("dtype ", dtype, " shape ", shape_str(shape), " needs ", bytes,
                            " bytes but data_offsets give ", end - begin, " (mislabelled)"));
        Entry entry{std::move(dtype), std::move(shape), begin, end};
        if (!entries_.emplace(name, std::move(entry)).second) throw bad("named twice in the header");
      },
      [&](std::string key, std::string value) { metadata_[std::move(key)] = std::move(value); });
  check_layout(data_size);
}

void SafetensorsFile::check_layout(uint64_t data_size) const {
  // As Hugging Face's reader: the tensors' byte ranges, in order, tile the data exactly. No
  // two tensors share a byte (one would silently alias the other), no byte is left to none
  // (a hole could hide a second file inside this one).
  std::vector<std::pair<std::pair<uint64_t, uint64_t>, const std::string*>> ordered;
  for (const auto& [name, entry] : entries_) ordered.push_back({{entry.begin, entry.end}, &name});
  std::sort(ordered.begin(), ordered.end());
  uint64_t covered = 0;
  const std::string* previous = nullptr;
  uint64_t previous_begin = 0;
  for (const auto& [range, name] : ordered) {
    if (range.first < covered)
      throw InputError(str_cat("'", path_, "': tensor ", *name, ": data_offsets [", range.first, ", ", range.second,
                               ") overlap tensor ", *previous, "'s [", previous_begin, ", ", covered,
                               ") (each byte of the data belongs to one tensor)"));
    if (range.first > covered)
      throw InputError(str_cat("'", path_, "': bytes [", covered, ", ", range.first,
                               ") of the data belong to no tensor (expected the tensors to cover the data without gaps)"));
    covered = range.second;
    previous = name;
    previous_begin = range.first;
  }
  if (covered != data_size)
    throw InputError(str_cat("'", path_, "': the data holds ", data_size - covered, " bytes past the last tensor (",
                             data_size, " bytes of data, tensors up to byte ", covered, ")"));
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::pair<uint64_t, std::string>> ordered;
  for (const auto& [name, entry] : entries_) ordered.emplace_back(entry.begin, name);
  std::sort(ordered.begin(), ordered.end());
  std::vector<std::string> out;
  for (auto& item : ordered) out.push_back(std::move(item.second));
  return out;
}

const SafetensorsFile::Entry& SafetensorsFile::entry(const std::string& name) const {
  const auto it = entries_.find(name);
  if (it == entries_.end()) throw InputError(str_cat("'", path_, "': no tensor ", name));
  return it->second;
}

const std::vector<int64_t>& SafetensorsFile::shape(const std::string& name) const { return entry(name).shape; }

std::vector<float> SafetensorsFile::read(const std::string& name) const {
  const Entry& e = entry(name);
  std::vector<char> bytes(e.end - e.begin);
  read_exactly(*fd_, data_start_ + e.begin, bytes.data(), bytes.size(), path_, str_cat("tensor ", name));
  const size_t element = dtype_bytes(e.dtype);
  std::vector<float> values(bytes.size() / element);
  for (size_t i = 0; i < values.size(); ++i) {
    if (e.dtype == "F32") {
      std::memcpy(&values[i], bytes.data() + 4 * i, 4);
    } else {
      uint16_t half = 0;
      std::memcpy(&half, bytes.data() + 2 * i, 2);
      values[i] = e.dtype == "BF16" ? std::bit_cast<float>(uint32_t{half} << 16) : half_to_float(half);
    }
  }
  return values;
}

}  // namespace mirrored::io
