#include "mirrored/io/jsonl_reader.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>

#include "mirrored/core/error.h"
#include "mirrored/core/strings.h"
#include "mirrored/io/json_text.h"

namespace mirrored::io {
namespace {

// One flat record: {"key": value, ...}, values numbers, strings, true/false, null, arrays
// of numbers (and null) or arrays of flat objects (kept as JSON text). Strings and numbers are read by io/json_text.h's strict rules.
class Parser {
 public:
  Parser(const std::string& text, const std::string& origin)
      : text_(text), cursor_(text, [&origin](size_t position, const std::string& expected) {
          return str_cat(origin, ": not a JSON record at column ", position + 1, ": expected ", expected);
        }) {}

  JsonObject object() {
    JsonObject out = object_body();
    cursor_.skip_space();
    if (!cursor_.at_end()) cursor_.fail("the end of the line after the object");
    return out;
  }

  // [{...}, ...]: what objects() accepted, one JsonObject per element.
  std::vector<JsonObject> array_of_objects() {
    std::vector<JsonObject> out;
    cursor_.expect('[');
    if (!cursor_.consume(']')) {
      do out.push_back(object_body());
      while (cursor_.consume(','));
      cursor_.expect(']');
    }
    cursor_.skip_space();
    if (!cursor_.at_end()) cursor_.fail("the end of the array");
    return out;
  }

 private:
  JsonObject object_body() {
    JsonObject out;
    cursor_.expect('{');
    if (!cursor_.consume('}')) {
      do {
        std::string key = cursor_.string();
        cursor_.expect(':');
        cursor_.skip_space();
        out[key] = value(key);
      } while (cursor_.consume(','));
      cursor_.expect('}');
    }
    return out;
  }

  double number_or_null() {
    cursor_.skip_space();
    if (cursor_.consume_word("null")) return std::numeric_limits<double>::quiet_NaN();
    return cursor_.number();
  }

  JsonValue value(const std::string& key) {
    const char c = cursor_.peek();
    if (c == '"') return cursor_.string();
    if (c == '[') {
      const size_t start = cursor_.position();
      cursor_.expect('[');
      cursor_.skip_space();
      if (cursor_.peek() == '{') return objects(start, key);
      std::vector<double> array;
      if (cursor_.consume(']')) return array;
      do array.push_back(number_or_null());
      while (cursor_.consume(','));
      cursor_.expect(']');
      return array;
    }
    if (cursor_.consume_word("true")) return int64_t{1};
    if (cursor_.consume_word("false")) return int64_t{0};
    if (cursor_.consume_word("null")) return std::numeric_limits<double>::quiet_NaN();
    if (c == '{') cursor_.fail(str_cat("a number, string or array for '", key, "' (nested objects are not read)"));
    // Integers stay exact (int64_t); one beyond its range is an error, not a rounded value.
    const size_t start = cursor_.position();
    const std::string_view text = cursor_.number_text();
    if (json_is_integer_text(text)) {
      int64_t integer = 0;
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), integer);
      if (error == std::errc() && end == text.data() + text.size()) return integer;
      cursor_.seek(start);
      cursor_.fail(str_cat("an integer within 64 bits for '", key, "'"));
    }
    cursor_.seek(start);
    return cursor_.number();
  }

  // An array of flat objects (to_json_array's: a membership record's lost ranks), kept as
  // its JSON text after checking it: [{"key": scalar, ...}, ...].
  JsonText objects(size_t start, const std::string& key) {
    do {
      cursor_.expect('{');
      if (!cursor_.consume('}')) {
        do {
          const std::string inner = cursor_.string();
          cursor_.expect(':');
          cursor_.skip_space();
          const char c = cursor_.peek();
          if (c == '"') {
            cursor_.string();
          } else if (!cursor_.consume_word("true") && !cursor_.consume_word("false") && !cursor_.consume_word("null")) {
            if (c == '{' || c == '[') cursor_.fail(str_cat("a number or string for '", key, "': '", inner, "'"));
            cursor_.number();
          }
        } while (cursor_.consume(','));
        cursor_.expect('}');
      }
    } while (cursor_.consume(','));
    cursor_.expect(']');
    return JsonText{std::string(text_.substr(start, cursor_.position() - start))};
  }

  std::string_view text_;
  JsonCursor cursor_;
};
}  // namespace

JsonObject parse_json_object(const std::string& line, const std::string& origin) {
  return Parser(line, origin).object();
}

namespace {

// What a JSON value is, named from its first character, for "expected a string" errors.
std::string json_kind(char first) {
  if (first == '{') return "an object";
  if (first == '[') return "an array";
  if (first == 't' || first == 'f') return "a boolean";
  if (first == 'n') return "null";
  return "a number";
}

}  // namespace

std::string json_string_field(std::string_view line, const std::string& field, const std::string& origin) {
  JsonCursor cursor(line, [&origin](size_t position, const std::string& expected) {
    return str_cat(origin, ": not a JSON record at column ", position + 1, ": expected ", expected);
  });
  std::optional<std::string> value;
  cursor.expect('{');
  if (!cursor.consume('}')) {
    do {
      const std::string key = cursor.string();
      cursor.expect(':');
      cursor.skip_space();
      if (key != field) {
        cursor.skip_value();
        continue;
      }
      if (value) throw InputError(str_cat(origin, ": field '", field, "' appears twice (expected it once a record)"));
      const char first = cursor.peek();
      if (first != '"') {
        throw InputError(str_cat(origin, ": field '", field, "' is ", json_kind(first),
                                 "; expected a string (the document's text)"));
      }
      value = cursor.string();
    } while (cursor.consume(','));
    cursor.expect('}');
  }
  cursor.skip_space();
  if (!cursor.at_end()) cursor.fail("the end of the line after the object");
  if (!value) throw InputError(str_cat(origin, ": no field '", field, "' (expected a string '", field, "' in every record)"));
  return *std::move(value);
}

std::vector<JsonObject> parse_json_objects(const JsonText& array, const std::string& origin) {
  return Parser(array.text, origin).array_of_objects();
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

int64_t json_integer(const JsonObject& object, const std::string& key, const std::string& origin, int64_t min,
                     int64_t max) {
  const auto it = object.find(key);
  if (it != object.end())
    if (const auto* i = std::get_if<int64_t>(&it->second); i != nullptr && *i >= min && *i <= max) return *i;
  throw InputError(str_cat(origin, ": field '", key, "' must be an integer from ", min, " to ", max),
                   ExitCode::kBadInput);
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
