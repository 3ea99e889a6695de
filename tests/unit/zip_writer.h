#pragma once
// Writes small zip archives for tests, without zlib: members are either stored (method 0)
// or deflate-coded (method 8) as deflate "stored" blocks, which any inflater accepts. The
// real wheel, with genuinely compressed members, is covered by tests/integration.
#include <algorithm>
#include <array>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace mirrored::testing {

struct ZipInput {
  std::string name;
  std::string data;
  bool deflate = true;
  uint32_t declared_size = 0;  // the uncompressed size the archive claims; 0: the real one
};

inline uint32_t crc32_of(const std::string& data) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = 0xFFFFFFFFu;
  for (const char ch : data) crc = table[(crc ^ static_cast<uint8_t>(ch)) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

inline void put16(std::string& out, uint32_t v) {
  out.push_back(static_cast<char>(v & 0xFF));
  out.push_back(static_cast<char>((v >> 8) & 0xFF));
}
inline void put32(std::string& out, uint32_t v) {
  put16(out, v & 0xFFFF);
  put16(out, v >> 16);
}

// Deflate stream of stored blocks (RFC 1951, BTYPE 00), at most 65535 bytes each.
inline std::string deflate_stored(const std::string& data) {
  std::string out;
  size_t at = 0;
  do {
    const size_t n = std::min<size_t>(data.size() - at, 65535);
    const bool last = at + n == data.size();
    out.push_back(static_cast<char>(last ? 1 : 0));
    put16(out, static_cast<uint32_t>(n));
    put16(out, static_cast<uint32_t>(~n & 0xFFFF));
    out.append(data, at, n);
    at += n;
  } while (at < data.size());
  return out;
}

// `corrupt_crc_of`: a member whose recorded CRC-32 is deliberately wrong.
inline void write_zip(const std::string& path, const std::vector<ZipInput>& members,
                      const std::string& corrupt_crc_of = "") {
  std::string file, directory;
  for (const ZipInput& member : members) {
    const std::string packed = member.deflate ? deflate_stored(member.data) : member.data;
    const uint32_t crc = crc32_of(member.data) ^ (member.name == corrupt_crc_of ? 1u : 0u);
    const auto offset = static_cast<uint32_t>(file.size());
    const uint16_t method = member.deflate ? 8 : 0;
    put32(file, 0x04034b50);
    put16(file, 20);  // version needed
    put16(file, 0);   // flags
    put16(file, method);
    put32(file, 0);   // time, date
    put32(file, crc);
    const uint32_t declared = member.declared_size != 0 ? member.declared_size : static_cast<uint32_t>(member.data.size());
    put32(file, static_cast<uint32_t>(packed.size()));
    put32(file, declared);
    put16(file, static_cast<uint32_t>(member.name.size()));
    put16(file, 0);   // extra
    file += member.name;
    file += packed;

    put32(directory, 0x02014b50);
    put16(directory, 20);  // made by
    put16(directory, 20);  // needed
    put16(directory, 0);
    put16(directory, method);
    put32(directory, 0);
    put32(directory, crc);
    put32(directory, static_cast<uint32_t>(packed.size()));
    put32(directory, declared);
    put16(directory, static_cast<uint32_t>(member.name.size()));
    put16(directory, 0);  // extra
    put16(directory, 0);  // comment
    put16(directory, 0);  // disk
    put16(directory, 0);  // internal attributes
    put32(directory, 0);  // external attributes
    put32(directory, offset);
    directory += member.name;
  }
  const auto directory_offset = static_cast<uint32_t>(file.size());
  file += directory;
  put32(file, 0x06054b50);
  put16(file, 0);
  put16(file, 0);
  put16(file, static_cast<uint32_t>(members.size()));
  put16(file, static_cast<uint32_t>(members.size()));
  put32(file, static_cast<uint32_t>(directory.size()));
  put32(file, directory_offset);
  put16(file, 0);  // comment
  std::ofstream(path, std::ios::binary) << file;
}

}  // namespace mirrored::testing
