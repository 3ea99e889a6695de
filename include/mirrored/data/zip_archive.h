#pragma once
// Reading members of a zip archive (a Python wheel is one) through zlib: the central
// directory lists the members, each is inflated (or copied, when stored) and its CRC-32
// checked. Enough for wheels and ordinary zip files; multi-disk archives, encryption and
// Zip64 (archives or members of 4 GiB and more) are refused with a clear error.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mirrored::data {

struct ZipMember {
  std::string name;              // path inside the archive, '/'-separated, as stored
  uint16_t method = 0;           // 0 stored, 8 deflate
  uint32_t crc32 = 0;
  uint64_t compressed_size = 0;
  uint64_t size = 0;             // uncompressed
  uint64_t local_header_offset = 0;
};

class ZipArchive {
 public:
  // Reads the central directory. InputError naming the file when it is missing, not a zip
  // archive, truncated, or uses a feature listed above.
  explicit ZipArchive(std::string path);

  const std::string& path() const { return path_; }
  const std::vector<ZipMember>& members() const { return members_; }  // in archive order

  // The member's uncompressed bytes; InputError on a damaged member (bad header, inflate
  // error, size or CRC-32 mismatch) naming the archive and the member. Memory follows what
  // the data inflates to, never more than the declared size, which must be within 1100:1 of
  // the compressed size (deflate's best is about 1032:1) and below 4 GiB (no Zip64): a
  // member declaring more, or inflating past its declared size, is refused before or as soon
  // as that happens.
  std::vector<uint8_t> read(const ZipMember& member) const;

 private:
  std::string path_;
  std::shared_ptr<const int> fd_;  // the archive, open from the constructor on (shared by copies)
  uint64_t file_size_ = 0;
  std::vector<ZipMember> members_;
};

}  // namespace mirrored::data
