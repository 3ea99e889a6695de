#include "mirrored/data/decompressing_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "mirrored/core/error.h"
#include "mirrored/core/strings.h"

namespace mirrored::data {

// The per-format state: decodes what it can of in[at, end) into out (advancing `at`), and
// says whether the data so far ends where a member or frame ends.
class DecompressingReader::Decoder {
 public:
  virtual ~Decoder() = default;
  virtual size_t decode(const uint8_t* in, size_t& at, size_t end, uint8_t* out, size_t capacity) = 0;
  virtual bool at_boundary() const = 0;
  virtual const char* format() const = 0;
};

namespace {

constexpr size_t kInputBytes = size_t{1} << 20;
// The slack of the expansion rule: one output buffer's worth, so a small file holding one
// run (a few bytes that make a page of spaces) is not refused for its size alone.
constexpr uint64_t kExpansionSlack = uint64_t{1} << 20;

std::string lower_extension(const std::string& path) {
  std::string extension = std::filesystem::path(path).extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return extension;
}

// gzip members through zlib's inflate (windowBits 15 + 16: the gzip wrapper, CRC-32 and
// length checked by zlib at each member's end).
class GzipDecoder final : public DecompressingReader::Decoder {
 public:
  explicit GzipDecoder(const std::string& path) : path_(path) {
    if (inflateInit2(&stream_, 15 + 16) != Z_OK) throw Error(ExitCode::kFailure, "zlib: inflateInit2 failed");
  }
  ~GzipDecoder() override { inflateEnd(&stream_); }

  size_t decode(const uint8_t* in, size_t& at, size_t end, uint8_t* out, size_t capacity) override {
    if (!in_member_) {
      if (at == end) return 0;
      inflateReset(&stream_);  // the next member (`cat a.gz b.gz` is one valid stream)
      in_member_ = true;
    }
    stream_.next_in = const_cast<Bytef*>(in + at);
    stream_.avail_in = static_cast<uInt>(end - at);
    stream_.next_out = out;
    stream_.avail_out = static_cast<uInt>(std::min<size_t>(capacity, UINT32_MAX));
    const int status = inflate(&stream_, Z_NO_FLUSH);
    at = end - stream_.avail_in;
    const size_t produced = std::min<size_t>(capacity, UINT32_MAX) - stream_.avail_out;
    if (status == Z_STREAM_END) {
      in_member_ = false;
    } else if (status != Z_OK && status != Z_BUF_ERROR) {  // Z_BUF_ERROR: no input yet
      throw InputError(str_cat("'", path_, "': damaged gzip data (zlib: ",
                               stream_.msg ? stream_.msg : zError(status), ")"));
    }
    return produced;
  }
  bool at_boundary() const override { return !in_member_; }
  const char* format() const override { return "gzip"; }

 private:
  std::string path_;
  z_stream stream_{};
  bool in_member_ = false;
};

// zstd frames through ZSTD_decompressStream (frame checksums, when present, checked by
// libzstd). A frame's window is what the decoder holds: at most 2^27 bytes (128 MiB,
// libzstd's default limit, named here so it is this reader's promise, not a default's).
constexpr int kZstdWindowLogMax = 27;

class ZstdDecoder final : public DecompressingReader::Decoder {
 public:
  explicit ZstdDecoder(const std::string& path) : path_(path), context_(ZSTD_createDCtx()) {
    if (context_ == nullptr) throw Error(ExitCode::kFailure, "libzstd: ZSTD_createDCtx failed");
    ZSTD_DCtx_setParameter(context_, ZSTD_d_windowLogMax, kZstdWindowLogMax);
  }
  ~ZstdDecoder() override { ZSTD_freeDCtx(context_); }

  size_t decode(const uint8_t* in, size_t& at, size_t end, uint8_t* out, size_t capacity) override {
    ZSTD_inBuffer input{in + at, end - at, 0};
    ZSTD_outBuffer output{out, capacity, 0};
    const size_t status = ZSTD_decompressStream(context_, &output, &input);
    if (ZSTD_isError(status) && ZSTD_getErrorCode(status) == ZSTD_error_frameParameter_windowTooLarge) {
      throw InputError(str_cat("'", path_, "': a zstd frame with a window above 128 MiB (expected at most ",
                               "zstd --long=27; recompress it with a smaller window)"));
    }
    if (ZSTD_isError(status))
      throw InputError(str_cat("'", path_, "': damaged zstd data (libzstd: ", ZSTD_getErrorName(status), ")"));
    at += input.pos;
    // 0: a frame decoded and flushed whole. A call that moved nothing (no input left) says
    // nothing about the frame: it answers with the header size of a next frame.
    if (input.pos > 0 || output.pos > 0) frame_done_ = status == 0;
    return output.pos;
  }
  bool at_boundary() const override { return frame_done_; }
  const char* format() const override { return "zstd"; }

 private:
  std::string path_;
  ZSTD_DCtx* context_;
  bool frame_done_ = true;
};

}  // namespace

Compression compression_of(const std::string& path) {
  const std::string extension = lower_extension(path);
  if (extension == ".gz") return Compression::kGzip;
  if (extension == ".zst") return Compression::kZstd;
  return Compression::kNone;
}

std::string without_compression_extension(const std::string& path) {
  if (compression_of(path) == Compression::kNone) return path;
  return path.substr(0, path.size() - lower_extension(path).size());
}

DecompressingReader::DecompressingReader(const std::string& path, bool follow_symlinks)
    : path_(path), compression_(compression_of(path)) {
  // O_NONBLOCK: a FIFO put where a file was is not waited on (and is refused below).
  const int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | (follow_symlinks ? 0 : O_NOFOLLOW);
  fd_ = ::open(path.c_str(), flags);
  if (fd_ < 0) {
    const int error = errno;
    if (error == ENOENT) throw InputError(str_cat("cannot open '", path, "': file does not exist"));
    if (error == ELOOP && !follow_symlinks) throw InputError(str_cat("cannot open '", path, "': a symlink (not followed)"));
    throw InputError(str_cat("cannot open '", path, "' for reading: ", std::strerror(error)));
  }
  struct stat info {};
  if (::fstat(fd_, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd_);
    throw InputError(str_cat("cannot open '", path, "': not a regular file"));
  }
  try {  // the destructor does not run for a constructor that throws: close here
    if (compression_ == Compression::kGzip) decoder_ = std::make_unique<GzipDecoder>(path);
    if (compression_ == Compression::kZstd) decoder_ = std::make_unique<ZstdDecoder>(path);
    if (decoder_) input_ = std::make_unique<uint8_t[]>(kInputBytes);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

DecompressingReader::~DecompressingReader() {
  if (fd_ >= 0) ::close(fd_);
}

bool DecompressingReader::fill_input() {
  input_at_ = input_end_ = 0;
  for (;;) {
    const ssize_t got = ::read(fd_, input_.get(), kInputBytes);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw InputError(str_cat("'", path_, "': read error: ", std::strerror(errno)));
    input_end_ = static_cast<size_t>(got);
    file_bytes_read_ += static_cast<uint64_t>(got);
    input_eof_ = got == 0;
    return !input_eof_;
  }
}

size_t DecompressingReader::read(uint8_t* out, size_t capacity) {
  if (!decoder_) {
    for (;;) {
      const ssize_t got = ::read(fd_, out, capacity);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) throw InputError(str_cat("'", path_, "': read error: ", std::strerror(errno)));
      file_bytes_read_ += static_cast<uint64_t>(got);
      bytes_given_ += static_cast<uint64_t>(got);
      return static_cast<size_t>(got);
    }
  }
  for (;;) {
    if (input_at_ == input_end_ && !input_eof_) fill_input();
    const bool input_done = input_at_ == input_end_ && input_eof_;
    // Called even with no input left: a decoder may still hold output it could not give.
    const size_t produced = decoder_->decode(input_.get(), input_at_, input_end_, out, capacity);
    if (produced > 0) {
      bytes_given_ += produced;
      if (bytes_given_ > kMaxExpansion * file_bytes_read_ + kExpansionSlack) {
        throw InputError(str_cat("'", path_, "': expands to more than ", kMaxExpansion, " bytes per ",
                                 decoder_->format(), " byte read (", bytes_given_, " from ", file_bytes_read_,
                                 "); refused as a decompression bomb (text compresses a few to one)"));
      }
      return produced;
    }
    if (input_done) {
      if (!decoder_->at_boundary()) {
        throw InputError(str_cat("'", path_, "': truncated ", decoder_->format(), " data (the file ends inside a ",
                                 decoder_->format() == std::string("gzip") ? "member" : "frame", ", after ",
                                 file_bytes_read_, " bytes)"));
      }
      return 0;
    }
  }
}

}  // namespace mirrored::data
