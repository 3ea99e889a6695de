#pragma once
// Small string helpers shared by every layer (messages, config values, file names).
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace mirrored {

// Concatenates any streamable values: str_cat("step ", 3, ": ", 0.5f).
template <typename... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

template <typename Range>
std::string join(const Range& items, std::string_view separator) {
  std::ostringstream out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out << separator;
    out << item;
    first = false;
  }
  return out.str();
}

std::vector<std::string> split(std::string_view text, char separator);
std::string trim(std::string_view text);
// `value` with exactly `digits` digits after the point (printf's %.*f): fixed(0.5, 3) is "0.500".
std::string fixed(double value, int digits);

}  // namespace mirrored
