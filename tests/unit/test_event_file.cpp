// TensorBoard event files: CRC-32C against published vectors, the protobuf encoder against
// hand-assembled bytes, and the TFRecord framing of a written file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <cstring>
#include <iterator>

#include "mirrored/io/crc32c.h"
#include "mirrored/io/event_file_writer.h"
#include "mirrored/io/protobuf_writer.h"
#include "unit/temp_dir.h"

using namespace mirrored::io;

namespace {
std::string bytes_of(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out.push_back(static_cast<char>(v));
  return out;
}
uint32_t crc_of(const std::string& s) { return crc32c(s.data(), s.size()); }
}  // namespace

TEST(Crc32c, KnownVectors) {
  EXPECT_EQ(crc_of("123456789"), 0xE3069283u);           // the standard check value
  EXPECT_EQ(crc_of(""), 0u);
  EXPECT_EQ(crc_of(std::string(32, '\0')), 0x8A9136AAu);   // RFC 3720, B.4
  EXPECT_EQ(crc_of(std::string(32, '\xFF')), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(crc_of(ascending), 0x46DD794Eu);
}

TEST(Crc32c, ExtendsAcrossChunks) {
  const std::string text = "The quick brown fox jumps over the lazy dog";
  const uint32_t head = crc32c(text.data(), 10);
  EXPECT_EQ(crc32c(text.data() + 10, text.size() - 10, head), crc_of(text));
}

TEST(Crc32c, MaskIsTfRecordRotationPlusConstant) {
  EXPECT_EQ(mask_crc32c(0u), 0xA282EAD8u);
  EXPECT_EQ(mask_crc32c(0x00008000u), 0x00000001u + 0xA282EAD8u);  // bit 15 rotates to bit 0
  EXPECT_EQ(mask_crc32c(0x00000001u), 0x00020000u + 0xA282EAD8u);  // bit 0 rotates to bit 17
}

TEST(ProtoWriter, Varints) {
  std::string out;
  ProtoWriter::append_varint(out, 1);
  EXPECT_EQ(out, bytes_of({0x01}));
  out.clear();
  ProtoWriter::append_varint(out, 300);
  EXPECT_EQ(out, bytes_of({0xAC, 0x02}));
  out.clear();
  ProtoWriter::append_varint(out, UINT64_MAX);
  EXPECT_EQ(out, bytes_of({0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01}));
  EXPECT_EQ(ProtoWriter().varint(2, 150).str(), bytes_of({0x10, 0x96, 0x01}));
}

TEST(ProtoWriter, FixedWidthAndLengthDelimited) {
  EXPECT_EQ(ProtoWriter().fixed64(1, 1.0).str(), bytes_of({0x09, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F}));
  EXPECT_EQ(ProtoWriter().fixed32(2, 0.5f).str(), bytes_of({0x15, 0, 0, 0, 0x3F}));
  EXPECT_EQ(ProtoWriter().bytes(1, "loss").str(), bytes_of({0x0A, 0x04, 'l', 'o', 's', 's'}));
  EXPECT_EQ(ProtoWriter().bytes(17, "").str(), bytes_of({0x8A, 0x01, 0x00}));  // two-byte key
}

TEST(EventEncoding, FileVersionEvent) {
  const std::string expected = bytes_of({0x09, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F, 0x1A, 13}) + "brain.Event:2";
  EXPECT_EQ(encode_file_version_event(1.0), expected);
}

TEST(EventEncoding, ScalarEventMatchesHandBuiltBytes) {
  // Event{wall_time: 1.0, step: 3, summary{value{tag: "a", simple_value: 1.0}}}
  const std::string value = bytes_of({0x0A, 0x01, 'a', 0x15, 0x00, 0x00, 0x80, 0x3F});
  const std::string summary = bytes_of({0x0A, 0x08}) + value;
  const std::string expected =
      bytes_of({0x09, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F, 0x10, 0x03, 0x2A, 0x0A}) + summary;
  EXPECT_EQ(encode_scalars_event(1.0, 3, {{"a", 1.0f}}), expected);
}

TEST(EventEncoding, TfRecordFraming) {
  const std::string data = "hello";
  const std::string record = encode_tfrecord(data);
  ASSERT_EQ(record.size(), 8u + 4u + data.size() + 4u);
  EXPECT_EQ(record.substr(0, 8), bytes_of({5, 0, 0, 0, 0, 0, 0, 0}));
  auto u32_at = [&](size_t at) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(record[at + static_cast<size_t>(i)]);
    return v;
  };
  EXPECT_EQ(u32_at(8), mask_crc32c(crc32c(record.data(), 8)));
  EXPECT_EQ(record.substr(12, 5), data);
  EXPECT_EQ(u32_at(17), mask_crc32c(crc_of(data)));
}

TEST(EventFileWriter, WritesVersionThenScalarRecords) {
  mirrored::testing::TempDir dir;
  std::string path;
  {
    EventFileWriter writer(dir.file("tb"));
    path = writer.path();
    writer.add_scalars(7, {{"train/loss", 0.25f}, {"train/lr", 0.05f}});
  }
  EXPECT_EQ(std::filesystem::path(path).parent_path(), dir.path() / "tb");
  EXPECT_EQ(std::filesystem::path(path).filename().string().rfind("events.out.tfevents.", 0), 0u);
  std::ifstream in(path, std::ios::binary);
  const std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Split the records back out and compare every data part to its encoding (the wall time
  // is the only field not known in advance, so it is taken from the record itself).
  std::vector<std::string> records;
  for (size_t at = 0; at < content.size();) {
    ASSERT_LE(at + 12, content.size());
    uint64_t length = 0;
    for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<uint8_t>(content[at + static_cast<size_t>(i)]);
    ASSERT_LE(at + 16 + length, content.size());
    const std::string data = content.substr(at + 12, length);
    EXPECT_EQ(content.substr(at, 16 + length), encode_tfrecord(data));
    records.push_back(data);
    at += 16 + length;
  }
  ASSERT_EQ(records.size(), 2u);
  double wall_time = 0;
  std::memcpy(&wall_time, records[1].data() + 1, 8);
  EXPECT_GT(wall_time, 1.6e9);
  EXPECT_EQ(records[1], encode_scalars_event(wall_time, 7, {{"train/loss", 0.25f}, {"train/lr", 0.05f}}));
  EXPECT_NE(records[0].find("brain.Event:2"), std::string::npos);
}
