#include "mirrored/data/zip_archive.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "mirrored/core/error.h"

namespace mirrored::data {
namespace {

// Record signatures and fixed sizes from PKWARE's APPNOTE.TXT, section 4.3.
constexpr uint32_t kEndOfDirectory = 0x06054b50;
constexpr uint32_t kZip64Locator = 0x07064b50;
constexpr uint32_t kDirectoryEntry = 0x02014b50;
constexpr uint32_t kLocalHeader = 0x04034b50;
constexpr size_t kEndOfDirectoryBytes = 22;
constexpr size_t kZip64LocatorBytes = 20;
constexpr size_t kDirectoryEntryBytes = 46;
constexpr size_t kLocalHeaderBytes = 30;
constexpr size_t kMaxCommentBytes = 0xFFFF;
constexpr uint16_t kStored = 0;
constexpr uint16_t kDeflated = 8;
constexpr uint16_t kEncryptedFlag = 0x1;
// Deflate cannot compress better than about 1032:1; a member declaring more is damaged
// (or hostile), and is refused before its size is allocated.
constexpr uint64_t kMaxDeflateRatio = 1100;
// zlib's interfaces take 32-bit lengths.
constexpr uint64_t kZlibPiece = uint64_t{1} << 30;
// What is inflated at a time before it joins the member's bytes.
constexpr size_t kInflatePiece = size_t{256} << 10;

uint16_t u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}

InputError archive_problem(const std::string& path, const std::string& what) {
  return InputError(str_cat("'", path, "': ", what));
}

std::vector<uint8_t> read_range(int fd, const std::string& path, uint64_t offset, uint64_t count, const char* what) {
  std::vector<uint8_t> bytes(count);
  uint64_t done = 0;
  while (done < count) {
    const ssize_t got = pread(fd, bytes.data() + done, static_cast<size_t>(std::min<uint64_t>(count - done, kZlibPiece)),
                              static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    done += static_cast<uint64_t>(got);
  }
  if (done != count) {
    throw archive_problem(path, str_cat("truncated zip archive: cannot read the ", what, " (", count, " bytes at offset ",
                                offset, ")"));
  }
  return bytes;
}

// The end-of-central-directory record sits in the last 22 bytes plus an optional comment
// of up to 64 KiB; the last signature that fits is the one.
size_t find_end_of_directory(const std::vector<uint8_t>& tail) {
  for (size_t i = tail.size() - kEndOfDirectoryBytes + 1; i-- > 0;) {
    if (u32(&tail[i]) == kEndOfDirectory && i + kEndOfDirectoryBytes + u16(&tail[i + 20]) <= tail.size()) return i;
  }
  return std::string::npos;
}

// Inflates into what has arrived, a piece at a time: memory follows the data actually
// inflated, never the size a (possibly lying) directory entry declares, and inflating stops
// as soon as the output passes that size.
std::vector<uint8_t> inflate_raw(const std::string& path, const ZipMember& member, const std::vector<uint8_t>& packed) {
  std::vector<uint8_t> out;
  std::vector<uint8_t> piece(kInflatePiece);
  z_stream stream{};
  if (inflateInit2(&stream, -MAX_WBITS) != Z_OK) throw Error(ExitCode::kFailure, "zlib inflateInit2 failed");
  uint64_t in_done = 0;
  int status = Z_OK;
  bool too_long = false;
  while (status == Z_OK) {
    if (stream.avail_in == 0 && in_done < packed.size()) {
      const uint64_t chunk = std::min<uint64_t>(packed.size() - in_done, kZlibPiece);
      stream.next_in = const_cast<Bytef*>(packed.data() + in_done);
      stream.avail_in = static_cast<uInt>(chunk);
      in_done += chunk;
    }
    stream.next_out = piece.data();
    stream.avail_out = static_cast<uInt>(piece.size());
    const uInt in_before = stream.avail_in;
    status = inflate(&stream, Z_NO_FLUSH);
    const size_t produced = piece.size() - stream.avail_out;
    if (out.size() + produced > member.size) {
      too_long = true;
      break;
    }
    out.insert(out.end(), piece.begin(), piece.begin() + static_cast<std::ptrdiff_t>(produced));
    // No progress with no input left: the stream is cut short.
    if (status == Z_BUF_ERROR || (status == Z_OK && produced == 0 && in_before == stream.avail_in)) break;
  }
  const std::string reason = stream.msg != nullptr ? stream.msg : "";
  inflateEnd(&stream);
  if (too_long) {
    throw archive_problem(path, str_cat("member ", member.name, " inflates to more than the ", member.size,
                                        " bytes its directory entry declares; the archive is corrupt"));
  }
  if (status != Z_STREAM_END) {
    throw archive_problem(path, str_cat("member ", member.name, " cannot be inflated",
                                reason.empty() ? std::string(" (its data is cut short)") : str_cat(": ", reason)));
  }
  if (out.size() != member.size) {
    throw archive_problem(path, str_cat("member ", member.name, " inflates to ", out.size(), " bytes, its directory entry says ",
                                member.size));
  }
  return out;
}

uint32_t crc_of(const std::vector<uint8_t>& bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (uint64_t done = 0; done < bytes.size();) {
    const uint64_t piece = std::min<uint64_t>(bytes.size() - done, kZlibPiece);
    crc = crc32(crc, bytes.data() + done, static_cast<uInt>(piece));
    done += piece;
  }
  return static_cast<uint32_t>(crc);
}

}  // namespace

ZipArchive::ZipArchive(std::string path) : path_(std::move(path)) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path_, error)) {
    throw InputError(str_cat("cannot open '", path_, "': ",
                             std::filesystem::exists(path_, error) ? "not a regular file" : "file does not exist"));
  }
  // One descriptor for the directory and every member: what was checked is what is read.
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw archive_problem(path_, str_cat("cannot open the zip archive for reading: ", std::strerror(errno)));
  fd_ = std::shared_ptr<const int>(new int(fd), [](const int* held) {
    ::close(*held);
    delete held;
  });
  struct stat info {};
  file_size_ = fstat(fd, &info) == 0 ? static_cast<uint64_t>(info.st_size) : 0;
  if (file_size_ < kEndOfDirectoryBytes) {
    throw archive_problem(path_, str_cat("not a zip archive (", file_size_, " bytes, shorter than an end-of-directory record)"));
  }
  const uint64_t tail_bytes = std::min<uint64_t>(file_size_, kEndOfDirectoryBytes + kMaxCommentBytes);
  const uint64_t tail_offset = file_size_ - tail_bytes;
  const std::vector<uint8_t> tail = read_range(*fd_, path_, tail_offset, tail_bytes, "end of the file");
  const size_t end = find_end_of_directory(tail);
  if (end == std::string::npos) throw archive_problem(path_, "not a zip archive (no end-of-central-directory record)");

  const uint8_t* record = &tail[end];
  const uint16_t this_disk = u16(record + 4), directory_disk = u16(record + 6);
  const uint16_t entries_here = u16(record + 8), entries = u16(record + 10);
  const uint32_t directory_bytes = u32(record + 12), directory_offset = u32(record + 16);
  if (this_disk != 0 || directory_disk != 0 || entries_here != entries) {
    throw archive_problem(path_, "multi-disk (split) zip archives are not supported");
  }
  const bool zip64_locator = end >= kZip64LocatorBytes && u32(&tail[end - kZip64LocatorBytes]) == kZip64Locator;
  if (zip64_locator || entries == 0xFFFF || directory_bytes == 0xFFFFFFFF || directory_offset == 0xFFFFFFFF) {
    throw archive_problem(path_, "Zip64 archives (4 GiB or 65535 members and more) are not supported");
  }
  if (uint64_t{directory_offset} + directory_bytes > tail_offset + end) {
    throw archive_problem(path_, str_cat("truncated or corrupt zip archive: the central directory (", directory_bytes,
                                 " bytes at offset ", directory_offset, ") runs past its end record"));
  }

  const std::vector<uint8_t> directory = read_range(*fd_, path_, directory_offset, directory_bytes, "central directory");
  size_t at = 0;
  for (uint16_t i = 0; i < entries; ++i) {
    if (at + kDirectoryEntryBytes > directory.size() || u32(&directory[at]) != kDirectoryEntry) {
      throw archive_problem(path_, str_cat("corrupt zip central directory: entry ", i, " of ", entries, " is missing"));
    }
    const uint8_t* entry = &directory[at];
    const size_t name_bytes = u16(entry + 28), extra_bytes = u16(entry + 30), comment_bytes = u16(entry + 32);
    if (at + kDirectoryEntryBytes + name_bytes + extra_bytes + comment_bytes > directory.size()) {
      throw archive_problem(path_, str_cat("corrupt zip central directory: entry ", i, " runs past the directory's end"));
    }
    ZipMember member;
    member.name.assign(reinterpret_cast<const char*>(entry + kDirectoryEntryBytes), name_bytes);
    const uint16_t flags = u16(entry + 8);
    member.method = u16(entry + 10);
    member.crc32 = u32(entry + 16);
    member.compressed_size = u32(entry + 20);
    member.size = u32(entry + 24);
    member.local_header_offset = u32(entry + 42);
    if (member.compressed_size == 0xFFFFFFFF || member.size == 0xFFFFFFFF || member.local_header_offset == 0xFFFFFFFF) {
      throw archive_problem(path_, str_cat("member ", member.name, " uses Zip64 sizes (4 GiB and more), not supported"));
    }
    if ((flags & kEncryptedFlag) != 0) throw archive_problem(path_, str_cat("member ", member.name, " is encrypted"));
    members_.push_back(std::move(member));
    at += kDirectoryEntryBytes + name_bytes + extra_bytes + comment_bytes;
  }
}

std::vector<uint8_t> ZipArchive::read(const ZipMember& member) const {
  if (member.method != kStored && member.method != kDeflated) {
    throw archive_problem(path_, str_cat("member ", member.name, " uses compression method ", member.method,
                                 "; only stored (0) and deflate (8) are supported"));
  }
  const uint64_t max_size = member.method == kStored ? member.compressed_size
                                                     : member.compressed_size * kMaxDeflateRatio + 4096;
  if (member.size > max_size) {
    throw archive_problem(path_, str_cat("member ", member.name, " declares ", member.size, " bytes from ",
                                 member.compressed_size, " compressed bytes; the archive is corrupt"));
  }
  if (member.local_header_offset + kLocalHeaderBytes > file_size_) {
    throw archive_problem(path_, str_cat("member ", member.name, ": local header offset ", member.local_header_offset,
                                 " is past the end of the file"));
  }
  const std::vector<uint8_t> header = read_range(*fd_, path_, member.local_header_offset, kLocalHeaderBytes,
                                                 str_cat("local header of ", member.name).c_str());
  if (u32(header.data()) != kLocalHeader) {
    throw archive_problem(path_, str_cat("member ", member.name, ": no local file header at offset ",
                                 member.local_header_offset, "; the archive is corrupt"));
  }
  const uint64_t data_offset = member.local_header_offset + kLocalHeaderBytes + u16(&header[26]) + u16(&header[28]);
  if (data_offset + member.compressed_size > file_size_) {
    throw archive_problem(path_, str_cat("member ", member.name, ": its ", member.compressed_size,
                                 " data bytes run past the end of the file; the archive is truncated"));
  }
  std::vector<uint8_t> packed = read_range(*fd_, path_, data_offset, member.compressed_size,
                                           str_cat("data of ", member.name).c_str());
  std::vector<uint8_t> bytes;
  if (member.method == kStored) {
    if (member.size != member.compressed_size) {
      throw archive_problem(path_, str_cat("member ", member.name, " is stored uncompressed but its sizes differ (",
                                   member.compressed_size, " vs ", member.size, ")"));
    }
    bytes = std::move(packed);
  } else {
    bytes = inflate_raw(path_, member, packed);
  }
  const uint32_t crc = crc_of(bytes);
  if (crc != member.crc32) {
    throw archive_problem(path_, str_cat("member ", member.name, " fails its CRC-32 check (", crc, " computed, ",
                                 member.crc32, " recorded); the archive is corrupt"));
  }
  return bytes;
}

}  // namespace mirrored::data
