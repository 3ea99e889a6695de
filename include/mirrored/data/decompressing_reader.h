#pragma once
// A file's bytes, read in pieces and decompressed on the way when its name says so:
// NAME.gz through zlib (gzip members, one after another, as `cat a.gz b.gz` makes), NAME.zst
// through libzstd (frames, one after another), anything else as stored. Memory is the two
// buffers of this class (and zstd's window, at most 128 MiB as libzstd's default limit
// allows), whatever the file's size.
//
// A decompression bomb is bounded by what is read: the bytes given out may never pass 1100
// per compressed byte read so far (plus one buffer), deflate's best being about 1032:1 and
// text's a few to one, the rule of zip_archive.h; a file that expands more is refused as
// soon as it does. A stream that ends early (a truncated download), a damaged stream, or
// bytes after the last member that are not another one are InputErrors naming the file.
#include <cstdint>
#include <memory>
#include <string>

namespace mirrored::data {

enum class Compression { kNone, kGzip, kZstd };

// By the name's last extension (case-insensitive): .gz, .zst, else none.
Compression compression_of(const std::string& path);
// `path` without a .gz or .zst extension ("a.jsonl.gz" -> "a.jsonl").
std::string without_compression_extension(const std::string& path);

inline constexpr uint64_t kMaxExpansion = 1100;  // decompressed bytes per compressed byte

class DecompressingReader {
 public:
  // Opens `path` for reading. With `follow_symlinks` false the file is opened with
  // O_NOFOLLOW (a symlink is refused, not followed), for files found by walking a folder
  // others can write. InputError naming the file: missing, unreadable, not a regular file.
  DecompressingReader(const std::string& path, bool follow_symlinks);
  ~DecompressingReader();
  DecompressingReader(const DecompressingReader&) = delete;
  DecompressingReader& operator=(const DecompressingReader&) = delete;

  // Up to `capacity` (> 0) decompressed bytes into `out`; 0 at the end of the data, and
  // only there. InputErrors as above.
  size_t read(uint8_t* out, size_t capacity);

  const std::string& path() const { return path_; }
  uint64_t file_bytes_read() const { return file_bytes_read_; }  // from disk, compressed
  uint64_t bytes_given() const { return bytes_given_; }          // handed out, decompressed

  class Decoder;  // the per-format state (decompressing_reader.cpp)

 private:
  // Refills the input buffer when it is used up; false at the end of the file.
  bool fill_input();

  std::string path_;
  int fd_ = -1;
  Compression compression_ = Compression::kNone;
  std::unique_ptr<uint8_t[]> input_;
  size_t input_at_ = 0, input_end_ = 0;
  bool input_eof_ = false;
  uint64_t file_bytes_read_ = 0, bytes_given_ = 0;
  std::unique_ptr<Decoder> decoder_;
};

}  // namespace mirrored::data
