// libFuzzer target: the JSON record reader (io::parse_json_object, which metrics.jsonl and
// the flight recorder's dumps are read with; io/json_text.h's strict strings and numbers).
// Any line must give an object or an InputError: never another exception (std::stoul once
// escaped from a \u escape), never a crash. A parsed record's numbers are finite or NaN
// (null), and its strings hold what the escapes spell.
#include <cmath>
#include <string>

#include "mirrored/core/error.h"
#include "mirrored/io/jsonl_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string line(reinterpret_cast<const char*>(data), size);
  try {
    const mirrored::io::JsonObject object = mirrored::io::parse_json_object(line, "fuzz.jsonl:1");
    for (const auto& [key, value] : object) {
      if (const auto* number = std::get_if<double>(&value); number && std::isinf(*number)) __builtin_trap();
      if (const auto* array = std::get_if<std::vector<double>>(&value))
        for (const double item : *array)
          if (std::isinf(item)) __builtin_trap();
    }
  } catch (const mirrored::InputError&) {
  }
  return 0;
}
