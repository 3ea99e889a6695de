#include "mirrored/io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "mirrored/core/error.h"
#include "mirrored/core/file_replacement.h"
#include "mirrored/core/tensor.h"

namespace mirrored::io {
namespace {

namespace fs = std::filesystem;

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

// The subset of JSON a safetensors header uses: objects, arrays, strings, non-negative
// integers. Errors name the file and the byte of the header where parsing stopped.
struct JsonMember;
struct JsonValue {
  enum class Kind { kObject, kArray, kString, kNumber } kind = Kind::kNumber;
  std::vector<JsonMember> members;  // object
  std::vector<JsonValue> items;                            // array
  std::string text;                                        // string
  uint64_t number = 0;
};
// A named member of an object. A struct rather than std::pair: a pair holding JsonValue
// inside JsonValue's own definition needs the type complete, which clang rejects.
struct JsonMember {
  std::string name;
  JsonValue value;
};

class JsonParser {
 public:
  JsonParser(const std::string& text, const std::string& path) : text_(text), path_(path) {}

  JsonValue parse_document() {
    JsonValue value = parse_value();
    skip_space();
    if (pos_ != text_.size()) fail("text after the header's object");
    return value;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(str_cat("'", path_, "': the safetensors header is not valid JSON at byte ", pos_, " of ",
                             text_.size(), ": ", what));
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\r' || text_[pos_] == '\t'))
      ++pos_;
  }
  void expect(char c) {
    skip_space();
    if (pos_ >= text_.size() || text_[pos_] != c) fail(str_cat("expected '", std::string(1, c), "'"));
    ++pos_;
  }
  JsonValue parse_value() {
    skip_space();
    if (pos_ >= text_.size()) fail("unexpected end");
    if (++depth_ > 16) fail("nested too deeply");
    JsonValue value;
    const char c = text_[pos_];
    if (c == '{') {
      value.kind = JsonValue::Kind::kObject;
      ++pos_;
      skip_space();
      if (pos_ < text_.size() && text_[pos_] == '}') {
        ++pos_;
      } else {
        while (true) {
          skip_space();
          std::string key = parse_string();
          expect(':');
          value.members.push_back(JsonMember{std::move(key), parse_value()});
          skip_space();
          if (pos_ < text_.size() && text_[pos_] == ',') { ++pos_; continue; }
          expect('}');
          break;
        }
      }
    } else if (c == '[') {
      value.kind = JsonValue::Kind::kArray;
      ++pos_;
      skip_space();
      if (pos_ < text_.size() && text_[pos_] == ']') {
        ++pos_;
      } else {
        while (true) {
          value.items.push_back(parse_value());
          skip_space();
          if (pos_ < text_.size() && text_[pos_] == ',') { ++pos_; continue; }
          expect(']');
          break;
        }
      }
    } else if (c == '"') {
      value.kind = JsonValue::Kind::kString;
      value.text = parse_string();
    } else if (c >= '0' && c <= '9') {
      value.kind = JsonValue::Kind::kNumber;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        if (value.number > (UINT64_MAX - 9) / 10) fail("integer too large");
        value.number = value.number * 10 + static_cast<uint64_t>(text_[pos_++] - '0');
      }
    } else {
      fail("expected an object, array, string or non-negative integer");
    }
    --depth_;
    return value;
  }
  std::string parse_string() {
    if (pos_ >= text_.size() || text_[pos_] != '"') fail("expected a string");
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) fail("unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) fail("unterminated escape");
      const char e = text_[pos_++];
      switch (e) {
        case '"': case '\\': case '/': out += e; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          if (pos_ + 4 > text_.size()) fail("short \\u escape");
          const unsigned code = static_cast<unsigned>(std::stoul(text_.substr(pos_, 4), nullptr, 16));
          pos_ += 4;
          if (code < 0x80) {
            out += static_cast<char>(code);
          } else if (code < 0x800) {
            out += static_cast<char>(0xc0 | (code >> 6));
            out += static_cast<char>(0x80 | (code & 0x3f));
          } else {  // surrogate pairs are not joined: names and metadata here are ASCII
            out += static_cast<char>(0xe0 | (code >> 12));
            out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
            out += static_cast<char>(0x80 | (code & 0x3f));
          }
          break;
        }
        default: fail("unknown escape");
      }
    }
  }

  const std::string& text_;
  const std::string& path_;
  size_t pos_ = 0;
  int depth_ = 0;
};

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

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  std::error_code error;
  if (!fs::is_regular_file(path, error)) throw InputError(str_cat("cannot open '", path, "': no such file"));
  const uint64_t file_size = fs::file_size(path, error);
  std::ifstream in(path, std::ios::binary);
  if (!in || error) throw InputError(str_cat("cannot open '", path, "' for reading"));
  if (file_size < 8)
    throw InputError(str_cat("'", path, "': ", file_size,
                             " bytes, truncated (expected a safetensors file: an 8-byte header length first)"));
  uint64_t header_size = 0;
  in.read(reinterpret_cast<char*>(&header_size), 8);
  if (header_size > kMaxHeaderBytes || header_size > file_size - 8)
    throw InputError(str_cat("'", path, "': the header length says ", header_size, " bytes but the file has ",
                             file_size - 8, " after it (truncated, or not a safetensors file)"));
  std::string header(header_size, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_size));
  if (!in) throw InputError(str_cat("'", path, "': read error in the header"));
  data_start_ = 8 + header_size;
  const uint64_t data_size = file_size - data_start_;

  const JsonValue root = JsonParser(header, path).parse_document();
  if (root.kind != JsonValue::Kind::kObject)
    throw InputError(str_cat("'", path, "': the safetensors header is not a JSON object"));
  for (const JsonMember& member : root.members) {
    // Named references, not structured bindings: the lambdas below capture them.
    const std::string& name = member.name;
    const JsonValue& value = member.value;
    if (name == "__metadata__") {
      for (const auto& [key, item] : value.members) {
        if (item.kind != JsonValue::Kind::kString)
          throw InputError(str_cat("'", path, "': __metadata__.", key, " is not a string"));
        metadata_[key] = item.text;
      }
      continue;
    }
    const auto field = [&](const char* key) -> const JsonValue* {
      for (const auto& [k, v] : value.members)
        if (k == key) return &v;
      return nullptr;
    };
    const auto bad = [&](const std::string& what) {
      return InputError(str_cat("'", path, "': tensor ", name, ": ", what));
    };
    const JsonValue* dtype = field("dtype");
    const JsonValue* shape = field("shape");
    const JsonValue* offsets = field("data_offsets");
    if (value.kind != JsonValue::Kind::kObject || !dtype || !shape || !offsets ||
        dtype->kind != JsonValue::Kind::kString || shape->kind != JsonValue::Kind::kArray ||
        offsets->kind != JsonValue::Kind::kArray || offsets->items.size() != 2)
      throw bad("expected {\"dtype\": string, \"shape\": [integers], \"data_offsets\": [begin, end]}");
    Entry entry;
    entry.dtype = dtype->text;
    uint64_t count = 1;
    for (const JsonValue& d : shape->items) {
      if (d.kind != JsonValue::Kind::kNumber || d.number > (uint64_t{1} << 40)) throw bad("shape holds a non-integer");
      entry.shape.push_back(static_cast<int64_t>(d.number));
      count *= d.number;
    }
    for (const JsonValue& o : offsets->items)
      if (o.kind != JsonValue::Kind::kNumber) throw bad("data_offsets holds a non-integer");
    entry.begin = offsets->items[0].number;
    entry.end = offsets->items[1].number;
    const size_t element = dtype_bytes(entry.dtype);
    if (element == 0) throw bad(str_cat("dtype ", entry.dtype, ", expected F32, F16 or BF16"));
    if (entry.begin > entry.end || entry.end > data_size)
      throw bad(str_cat("data_offsets [", entry.begin, ", ", entry.end, ") reach beyond the ", data_size,
                        " bytes of data in the file (truncated?)"));
    if (entry.end - entry.begin != count * element)
      throw bad(str_cat("dtype ", entry.dtype, " shape ", shape_str(entry.shape), " needs ", count * element,
                        " bytes but data_offsets give ", entry.end - entry.begin, " (mislabelled)"));
    if (!entries_.emplace(name, std::move(entry)).second) throw bad("named twice in the header");
  }
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
  std::ifstream in(path_, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(data_start_ + e.begin));
  std::vector<char> bytes(e.end - e.begin);
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!in) throw InputError(str_cat("'", path_, "': tensor ", name, ": read error (file changed while reading?)"));
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
