#pragma once
// SHA-256 (FIPS 180-4) of bytes, as lowercase hex: what `sha256sum` prints. Token files name
// the tokenizer model they were encoded with by this digest, so two files made with
// different tokenizers are told apart even when the model files share a name.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mirrored {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  std::string hex_digest();  // finishes the digest; the object is spent afterwards

 private:
  void compress(const unsigned char* block);
  uint32_t state_[8];
  unsigned char buffer_[64];
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

std::string sha256_hex(std::string_view bytes);
// The digest of a file's contents; InputError naming the file when it cannot be read.
std::string sha256_file_hex(const std::string& path);

}  // namespace mirrored
