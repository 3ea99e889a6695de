#pragma once
// The pieces of JSON (RFC 8259) every reader here shares: white space, strings and numbers,
// read strictly. Both JSON readers (jsonl_reader.h's records, safetensors.h's header) are
// built on it, so a bad escape or number fails the same way in each: an InputError naming
// the file and the position, never a std exception, never a silently wrong value.
//   - strings: the escapes \" \\ \/ \b \f \n \r \t and \uXXXX (four hex digits; a surrogate
//     pair becomes one code point, a lone surrogate is refused), written as UTF-8; a raw
//     control character (below 0x20) is refused;
//   - numbers: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? and nothing else (no NaN,
//     Infinity, hex or leading '+'); integers must fit the type asked for, and a number
//     whose value is not finite as a double (1e400) is refused.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace mirrored::io {

class JsonCursor {
 public:
  // `fail(position, expected)` builds the error of a reader (which names its file); it is
  // thrown as an InputError.
  using Failure = std::function<std::string(size_t position, const std::string& expected)>;
  JsonCursor(std::string_view text, Failure failure) : text_(text), failure_(std::move(failure)) {}

  size_t position() const { return at_; }
  // Back to an earlier position (to read a value again another way, or to fail there).
  void seek(size_t position) { at_ = position < at_ ? position : at_; }
  bool at_end() const { return at_ >= text_.size(); }
  char peek() const { return at_ < text_.size() ? text_[at_] : '\0'; }
  void skip_space();
  // Consumes `c` after white space, or fails expecting it.
  void expect(char c);
  // Consumes `c` after white space when it is next.
  bool consume(char c);
  // Consumes `word` when it is next (true, false, null).
  bool consume_word(std::string_view word);

  std::string string();
  // A number's text, checked against the grammar above.
  std::string_view number_text();
  // A number that must be an integer (no fraction or exponent) in [min, max].
  int64_t integer(int64_t min, int64_t max);
  uint64_t unsigned_integer(uint64_t max = UINT64_MAX);
  // Any number, finite as a double.
  double number();
  // Any JSON value, read by the rules above and dropped: objects and arrays nested at most
  // `max_depth` deep (deeper is refused, so a hostile line cannot exhaust the stack).
  void skip_value(int max_depth = kMaxSkipDepth);
  static constexpr int kMaxSkipDepth = 16;

  [[noreturn]] void fail(const std::string& expected) const;

 private:
  unsigned hex4();
  void skip_nested(int depth, int max_depth);

  std::string_view text_;
  Failure failure_;
  size_t at_ = 0;
};

// Whether `text` is an integer as this grammar spells one (no fraction, no exponent).
bool json_is_integer_text(std::string_view text);

}  // namespace mirrored::io
