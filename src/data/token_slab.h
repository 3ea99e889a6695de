#pragma once
// Private to data/: reading ranges of /tokens by hyperslab, and writing /tokens with the
// element type the format asks for (the io layer's H5File reads whole datasets and writes
// uint8 only). Every failing HDF5 call throws mirrored::Error naming the file and the call.
#include <cstdint>
#include <memory>
#include <string>

#include "mirrored/data/token_file.h"
#include "mirrored/io/hdf5.h"

namespace mirrored::data::detail {

// Throws Error(kFailure) "HDF5 <call> failed on '<path>' /tokens" when `status` < 0.
int64_t h5_ok(int64_t status, const char* call, const std::string& path);

class TokenSlabReader {
 public:
  // Reads /tokens of `file`, already open (the descriptor that was checked). HDF5's own
  // chunk cache is switched off: the caller caches what it reads, and memory stays within
  // the caller's bound.
  TokenSlabReader(io::H5File file, const TokenFileInfo& info);
  // Copies tokens [offset, offset + count) into `out` as stored (token_bytes each, host
  // byte order). Safe to call from several threads (the HDF5 library serialises calls).
  void read(int64_t offset, int64_t count, void* out) const;

 private:
  std::string path_;
  int token_bytes_;
  io::H5File file_;
  io::H5Handle tokens_;
};

// Opens `path` once, describes and validates it (open_token_file's checks, every token
// within the vocabulary) into `info`, and returns the reader of that same open file: the
// tokens read later are the ones that were checked, whatever becomes of the path.
std::unique_ptr<TokenSlabReader> open_checked_token_file(const std::string& path, TokenFileInfo& info);

// Creates /tokens [count] in `file` with `token_bytes`-wide unsigned storage and writes
// `data` (host byte order).
void write_tokens_dataset(io::H5File& file, const void* data, int64_t count, int token_bytes);

}  // namespace mirrored::data::detail
