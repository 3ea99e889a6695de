#include "mirrored/io/jsonl_writer.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "mirrored/core/error.h"

namespace mirrored::io {
namespace {
void append_string(std::ostringstream& out, const std::string& text) {
  out << '"';
  for (const char c : text) {
    switch (c) {
      case '"': out << "\\\""; break;
      case '\\': out << "\\\\"; break;
      case '\n': out << "\\n"; break;
      case '\t': out << "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
          out << escaped;
        } else {
          out << c;
        }
    }
  }
  out << '"';
}

void append_number(std::ostringstream& out, double d) {
  if (std::isfinite(d)) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.9g", d);
    out << text;
  } else {
    out << "null";  // JSON has no NaN/Inf
  }
}

void append_value(std::ostringstream& out, const JsonValue& value) {
  if (const auto* i = std::get_if<int64_t>(&value)) {
    out << *i;
  } else if (const auto* d = std::get_if<double>(&value)) {
    append_number(out, *d);
  } else if (const auto* array = std::get_if<std::vector<double>>(&value)) {
    out << '[';
    for (size_t k = 0; k < array->size(); ++k) {
      if (k) out << ", ";
      append_number(out, (*array)[k]);
    }
    out << ']';
  } else if (const auto* text = std::get_if<JsonText>(&value)) {
    out << text->text;
  } else {
    append_string(out, std::get<std::string>(value));
  }
}
}  // namespace

std::string to_json(const JsonRecord& record) {
  std::ostringstream out;
  out << '{';
  for (size_t i = 0; i < record.size(); ++i) {
    if (i) out << ", ";
    append_string(out, record[i].first);
    out << ": ";
    append_value(out, record[i].second);
  }
  out << '}';
  return out.str();
}

JsonText to_json_array(const std::vector<JsonRecord>& records) {
  std::string text = "[";
  for (size_t i = 0; i < records.size(); ++i) text += (i ? ", " : "") + to_json(records[i]);
  return {text + "]"};
}

JsonlWriter::JsonlWriter(const std::string& path, bool append)
    : path_(path), out_(path, append ? std::ios::app : std::ios::trunc) {
  if (!out_) throw Error(ExitCode::kWriteFailed, str_cat("cannot open '", path, "' for writing"), true);
}

void JsonlWriter::write(const JsonRecord& record) {
  out_ << to_json(record) << '\n';
  out_.flush();
  // The records before this one stay (each was flushed whole).
  if (!out_) throw Error(ExitCode::kWriteFailed, str_cat("writing a record to '", path_, "' failed (a full disk?)"));
}

}  // namespace mirrored::io
