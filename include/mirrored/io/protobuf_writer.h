#pragma once
// A minimal protocol-buffers encoder: enough wire format to write TensorBoard's Event and
// Summary messages (varint, 64-bit double, 32-bit float, length-delimited bytes and nested
// messages). Why not libprotobuf: we write a handful of fixed message shapes and never
// read any, so ~60 tested lines replace a code generator, a .proto copy of TensorFlow's
// schema and a library dependency on every build machine.
#include <cstdint>
#include <string>
#include <string_view>

namespace mirrored::io {

class ProtoWriter {
 public:
  // Each call appends one field (key = field_number << 3 | wire type, then the value).
  ProtoWriter& varint(int field, uint64_t value);                 // wire type 0 (int64, bool, enum)
  ProtoWriter& fixed64(int field, double value);                  // wire type 1 (double)
  ProtoWriter& fixed32(int field, float value);                   // wire type 5 (float)
  ProtoWriter& bytes(int field, std::string_view value);          // wire type 2 (string, bytes)
  ProtoWriter& message(int field, const ProtoWriter& nested) { return bytes(field, nested.str()); }

  const std::string& str() const { return out_; }

  // The bare varint encoding of `value` (7 bits a byte, least significant first).
  static void append_varint(std::string& out, uint64_t value);

 private:
  void key(int field, int wire_type);
  std::string out_;
};

}  // namespace mirrored::io
