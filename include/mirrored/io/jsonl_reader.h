#pragma once
// Reads back what JsonlWriter and the flight recorder write: one flat JSON object per line,
// whose values are numbers, strings, true/false, null, arrays of numbers, or arrays of flat
// objects (to_json_array's, read as JsonText: their JSON text); an object nested deeper is
// refused. For the commands that summarise a run (mirrored trace, mirrored info --ranks).
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "mirrored/io/jsonl_writer.h"

namespace mirrored::io {

using JsonObject = std::map<std::string, JsonValue>;

// Parses one line. Throws InputError naming `origin` (file:line) and what was expected.
// Integers without a fraction or exponent stay int64_t; null becomes NaN; true/false 1/0.
JsonObject parse_json_object(const std::string& line, const std::string& origin);

// A text corpus' record (one JSON object a line, of any shape: other fields may nest
// objects and arrays, read and dropped up to 16 deep): the string value of `field`.
// InputError naming `origin` (file:line) when the line is not a JSON object, `field` is
// missing or appears twice, or its value is not a string (the message says what it is).
std::string json_string_field(std::string_view line, const std::string& field, const std::string& origin);

// The elements of an array of flat objects read as JsonText (a membership record's "lost").
std::vector<JsonObject> parse_json_objects(const JsonText& array, const std::string& origin);

// Every non-empty line of `path`. Throws InputError naming the file when it cannot be read
// or a line is not a JSON object.
std::vector<JsonObject> read_jsonl(const std::string& path);

// Typed access with a clear error naming `origin`, the key and what was expected.
double json_number(const JsonObject& object, const std::string& key, const std::string& origin);
// An integer in [min, max] (a number with a fraction, or out of range, is an InputError).
int64_t json_integer(const JsonObject& object, const std::string& key, const std::string& origin, int64_t min,
                     int64_t max);
std::string json_string(const JsonObject& object, const std::string& key, const std::string& origin);
std::optional<std::string> json_optional_string(const JsonObject& object, const std::string& key);

}  // namespace mirrored::io
