#include "mirrored/io/json_text.h"

#include <charconv>
#include <cmath>

#include "mirrored/core/error.h"
#include "mirrored/core/strings.h"

namespace mirrored::io {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

void append_utf8(std::string& out, uint32_t code) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xc0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3f));
  } else if (code < 0x10000) {
    out += static_cast<char>(0xe0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (code & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (code >> 18));
    out += static_cast<char>(0x80 | ((code >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (code & 0x3f));
  }
}

}  // namespace

void JsonCursor::fail(const std::string& expected) const {
  throw InputError(failure_(at_, expected));
}

void JsonCursor::skip_space() {
  while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\n' || text_[at_] == '\r' || text_[at_] == '\t'))
    ++at_;
}

void JsonCursor::expect(char c) {
  skip_space();
  if (peek() != c || at_end()) fail(str_cat("'", std::string(1, c), "'"));
  ++at_;
}

bool JsonCursor::consume(char c) {
  skip_space();
  if (at_end() || text_[at_] != c) return false;
  ++at_;
  return true;
}

bool JsonCursor::consume_word(std::string_view word) {
  if (text_.substr(at_, word.size()) != word) return false;
  at_ += word.size();
  return true;
}

void JsonCursor::skip_value(int max_depth) { skip_nested(1, max_depth); }

void JsonCursor::skip_nested(int depth, int max_depth) {
  if (depth > max_depth) fail(str_cat("a value nested at most ", max_depth, " deep"));
  skip_space();
  const char c = peek();
  if (c == '"') {
    string();
  } else if (c == '{' || c == '[') {
    const char close = c == '{' ? '}' : ']';
    expect(c);
    if (consume(close)) return;
    do {
      if (c == '{') {
        string();
        expect(':');
      }
      skip_nested(depth + 1, max_depth);
    } while (consume(','));
    expect(close);
  } else if (!consume_word("true") && !consume_word("false") && !consume_word("null")) {
    number();
  }
}

unsigned JsonCursor::hex4() {
  unsigned code = 0;
  for (int i = 0; i < 4; ++i, ++at_) {
    const char c = peek();
    unsigned digit = 0;
    if (at_end()) fail("four hex digits after \\u");
    if (c >= '0' && c <= '9') digit = static_cast<unsigned>(c - '0');
    else if (c >= 'a' && c <= 'f') digit = static_cast<unsigned>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') digit = static_cast<unsigned>(c - 'A' + 10);
    else fail("four hex digits after \\u");
    code = code * 16 + digit;
  }
  return code;
}

std::string JsonCursor::string() {
  skip_space();
  if (peek() != '"' || at_end()) fail("a string");
  ++at_;
  std::string out;
  while (true) {
    if (at_end()) fail("the string's closing '\"'");
    const char c = text_[at_++];
    if (c == '"') return out;
    if (static_cast<unsigned char>(c) < 0x20) {
      --at_;
      fail("a character of a string (a control character must be escaped)");
    }
    if (c != '\\') {
      // The run of plain characters from here goes in at once: a corpus record's text is
      // mostly such runs, and a character at a time was a fifth of a .jsonl.gz import.
      size_t end = at_;
      while (end < text_.size() && text_[end] != '"' && text_[end] != '\\' &&
             static_cast<unsigned char>(text_[end]) >= 0x20)
        ++end;
      out += c;
      out.append(text_.substr(at_, end - at_));
      at_ = end;
      continue;
    }
    if (at_end()) fail("an escaped character");
    switch (text_[at_++]) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        uint32_t code = hex4();
        if (code >= 0xdc00 && code <= 0xdfff) fail("a \\u escape that is not a lone low surrogate");
        if (code >= 0xd800 && code <= 0xdbff) {
          // A high surrogate: its low half must follow, as \uDC00..\uDFFF.
          if (!consume_word("\\u")) fail("the low surrogate (\\uDC00 to \\uDFFF) after a high one");
          const uint32_t low = hex4();
          if (low < 0xdc00 || low > 0xdfff) fail("the low surrogate (\\uDC00 to \\uDFFF) after a high one");
          code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
        }
        append_utf8(out, code);
        break;
      }
      default:
        --at_;
        fail("one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX");
    }
  }
}

std::string_view JsonCursor::number_text() {
  skip_space();
  const size_t start = at_;
  if (peek() == '-') ++at_;
  if (peek() == '0' && !at_end()) {
    ++at_;
  } else if (is_digit(peek())) {
    while (is_digit(peek())) ++at_;
  } else {
    fail("a number");
  }
  if (peek() == '.') {
    ++at_;
    if (!is_digit(peek())) fail("a digit after the decimal point");
    while (is_digit(peek())) ++at_;
  }
  if (peek() == 'e' || peek() == 'E') {
    ++at_;
    if (peek() == '+' || peek() == '-') ++at_;
    if (!is_digit(peek())) fail("a digit in the exponent");
    while (is_digit(peek())) ++at_;
  }
  return text_.substr(start, at_ - start);
}

int64_t JsonCursor::integer(int64_t min, int64_t max) {
  const size_t start = (skip_space(), at_);
  const std::string_view text = number_text();
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (!json_is_integer_text(text) || error != std::errc() || end != text.data() + text.size() || value < min ||
      value > max) {
    at_ = start;
    fail(str_cat("an integer from ", min, " to ", max));
  }
  return value;
}

uint64_t JsonCursor::unsigned_integer(uint64_t max) {
  const size_t start = (skip_space(), at_);
  const std::string_view text = number_text();
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (!json_is_integer_text(text) || text[0] == '-' || error != std::errc() || end != text.data() + text.size() ||
      value > max) {
    at_ = start;
    fail(str_cat("an integer from 0 to ", max));
  }
  return value;
}

double JsonCursor::number() {
  const size_t start = (skip_space(), at_);
  const std::string_view text = number_text();
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    at_ = start;
    fail("a number within a double's range");
  }
  return value;
}

bool json_is_integer_text(std::string_view text) { return text.find_first_of(".eE") == std::string_view::npos; }

}  // namespace mirrored::io
