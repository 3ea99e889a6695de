#pragma once
// metrics.jsonl: one JSON object per line, flushed per record so a crash loses nothing
// already reported and `tail -f` works.
#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace mirrored::io {

// An array holds numbers only (per-rank figures); a JsonText is JSON already encoded (an
// array of objects: to_json_array), written as it is.
struct JsonText {
  std::string text;
};
using JsonValue = std::variant<int64_t, double, std::string, std::vector<double>, JsonText>;
using JsonRecord = std::vector<std::pair<std::string, JsonValue>>;

std::string to_json(const JsonRecord& record);  // keys in the given order
JsonText to_json_array(const std::vector<JsonRecord>& records);

class JsonlWriter {
 public:
  JsonlWriter() = default;
  // Appends when `append` (a resumed run), else truncates. Throws naming the path.
  JsonlWriter(const std::string& path, bool append);
  bool is_open() const { return out_.is_open(); }
  void write(const JsonRecord& record);

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace mirrored::io
