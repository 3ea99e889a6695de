#include "mirrored/io/protobuf_writer.h"

#include <bit>
#include <cstring>

namespace mirrored::io {
namespace {

// Protocol buffers store fixed-width values little-endian whatever the host's order.
template <typename UInt>
void append_little_endian(std::string& out, UInt value) {
  for (size_t i = 0; i < sizeof(UInt); ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFFu));
}

}  // namespace

void ProtoWriter::append_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7Fu) | 0x80u));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void ProtoWriter::key(int field, int wire_type) {
  append_varint(out_, (static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type));
}

ProtoWriter& ProtoWriter::varint(int field, uint64_t value) {
  key(field, 0);
  append_varint(out_, value);
  return *this;
}

ProtoWriter& ProtoWriter::fixed64(int field, double value) {
  key(field, 1);
  append_little_endian(out_, std::bit_cast<uint64_t>(value));
  return *this;
}

ProtoWriter& ProtoWriter::fixed32(int field, float value) {
  key(field, 5);
  append_little_endian(out_, std::bit_cast<uint32_t>(value));
  return *this;
}

ProtoWriter& ProtoWriter::bytes(int field, std::string_view value) {
  key(field, 2);
  append_varint(out_, value.size());
  out_.append(value);
  return *this;
}

}  // namespace mirrored::io
