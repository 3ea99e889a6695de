#include "mirrored/io/jsonl_reader.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>

#include "mirrored/core/error.h"
#include "mirrored/core/strings.h"

namespace mirrored::io {
namespace {

class Parser {
 public:
  Parser(const std::string& text, const std::string& origin) : text_(text), origin_(origin) {}

  JsonObject object() {
    JsonObject out;
    expect('{');
    skip_space();
    if (peek() == '}') {
      ++at_;
      return finish(std::move(out));
    }
    while (true) {
      skip_space();
      std::string key = string();
      skip_space();
      expect(':');
      skip_space();
      out[key] = value(key);
      skip_space();
      if (peek() == ',') {
        ++at_;
        continue;
      }
      expect('}');
      return finish(std::move(out));
    }
  }

 private:
  JsonObject finish(JsonObject out) {
    skip_space();
    if (at_ != text_.size()) fail("the end of the line after the object");
    return out;
  }
  [[noreturn]] void fail(const std::string& expected) const {
    throw InputError(str_cat(origin_, ": not a JSON record at column ", at_ + 1, ": expected ", expected),
                     ExitCode::kBadInput);
  }
  char peek() const { return at_ < text_.size() ? text_[at_] : '\0'; }
  void skip_space() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
  }
  void expect(char c) {
    if (peek() != c) fail(str_cat("'", c, "'"));
    ++at_;
  }
  std::string string() {
    expect('"');
    std::string out;
    while (at_ < text_.size() && text_[at_] != '"') {
      char c = text_[at_++];
      if (c == '\\') {
        if (at_ >= text_.size()) fail("an escaped character");
        const char e = text_[at_++];
        switch (e) {
          case 'n': c = '\n'; break;
          case 't': c = '\t'; break;
          case 'u': {
            if (at_ + 4 > text_.size()) fail("four hex digits");
            c = static_cast<char>(std::strtol(text_.substr(at_, 4).c_str(), nullptr, 16));
            at_ += 4;
            break;
          }
          default: c = e;
        }
      }
      out += c;
    }
    expect('"');
    return out;
  }
  double number_or_null() {
    if (text_.compare(at_, 4, "null") == 0) {
      at_ += 4;
      return std::numeric_limits<double>::quiet_NaN();
    }
    const char* begin = text_.c_str() + at_;
    char* end = nullptr;
    const double d = std::strtod(begin, &end);
    if (end == begin) fail("a number");
    at_ += static_cast<size_t>(end - begin);
    return d;
  }
  JsonValue value(const std::string& key) {
    const char c = peek();
    if (c == '"') return string();
    if (c == '[') {
      ++at_;
      std::vector<double> array;
      skip_space();
      if (peek() == ']') {
        ++at_;
        return array;
      }
      while (true) {
        skip_space();
        array.push_back(number_or_null());
        skip_space();
        if (peek() == ',') {
          ++at_;
          continue;
        }
        expect(']');
        return array;
      }
    }
    if (text_.compare(at_, 4, "true") == 0) {
      at_ += 4;
      return int64_t{1};
    }
    if (text_.compare(at_, 5, "false") == 0) {
      at_ += 5;
      return int64_t{0};
    }
    if (c == '{') fail(str_cat("a number, string or array for '", key, "' (nested objects are not read)"));
    const size_t start = at_;
    const double d = number_or_null();
    const std::string spelled = text_.substr(start, at_ - start);
    if (spelled.find_first_of(".eEn") == std::string::npos) return static_cast<int64_t>(std::strtoll(spelled.c_str(), nullptr, 10));
    return d;
  }

  const std::string& text_;
  const std::string& origin_;
  size_t at_ = 0;
};
}  // namespace

JsonObject parse_json_object(const std::string& line, const std::string& origin) {
  return Parser(line, origin).object();
}

std::vector<JsonObject> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(str_cat("cannot read '", path, "'"), ExitCode::kBadInput);
  std::vector<JsonObject> records;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (trim(line).empty()) continue;
    records.push_back(parse_json_object(line, str_cat(path, ":", number)));
  }
  return records;
}

double json_number(const JsonObject& object, const std::string& key, const std::string& origin) {
  const auto it = object.find(key);
  if (it != object.end()) {
    if (const auto* i = std::get_if<int64_t>(&it->second)) return static_cast<double>(*i);
    if (const auto* d = std::get_if<double>(&it->second)) return *d;
  }
  throw InputError(str_cat(origin, ": field '", key, "' must be a number"), ExitCode::kBadInput);
}

std::string json_string(const JsonObject& object, const std::string& key, const std::string& origin) {
  const auto it = object.find(key);
  if (it != object.end())
    if (const auto* s = std::get_if<std::string>(&it->second)) return *s;
  throw InputError(str_cat(origin, ": field '", key, "' must be a string"), ExitCode::kBadInput);
}

std::optional<std::string> json_optional_string(const JsonObject& object, const std::string& key) {
  const auto it = object.find(key);
  if (it == object.end()) return std::nullopt;
  if (const auto* s = std::get_if<std::string>(&it->second)) return *s;
  return std::nullopt;
}

}  // namespace mirrored::io
