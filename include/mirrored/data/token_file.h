#pragma once
// The on-disk format of a token sequence (language-model data): an HDF5 file with
//   /tokens      uint8 [N] (vocabulary up to 256) or uint16 [N] (up to 65536)
// and attributes on the root group
//   tokenizer    string, how text became tokens ("bytes": one token per UTF-8 byte)
//   vocab_size   integer, every token lies in [0, vocab_size)
//   source       string, optional: what the tokens were made from
// The file is read in windows (hyperslabs), so it never has to fit in memory.
#include <cstdint>
#include <span>
#include <string>

namespace mirrored::data {

inline constexpr const char* kTokensDataset = "/tokens";
inline constexpr const char* kByteTokenizer = "bytes";
inline constexpr int64_t kByteVocabulary = 256;
inline constexpr int64_t kMaxVocabulary = 65536;  // uint16 tokens

struct TokenFileInfo {
  std::string path;
  int64_t num_tokens = 0;
  int64_t vocab_size = 0;
  std::string tokenizer;
  std::string source;       // "" when the attribute is absent
  int token_bytes = 1;      // 1 for uint8 storage, 2 for uint16
  int64_t chunk_tokens = 0; // HDF5 chunk length; 0 for contiguous storage
};

// True when `path` is an HDF5 file holding /tokens (InputError for a missing or non-HDF5
// file, like every reader here).
bool is_token_file(const std::string& path);

// Checks the layout and the attributes, not the token values: an InputError naming the
// file and the dataset or attribute when /tokens is missing, not rank 1, not uint8/uint16,
// empty, or vocab_size / tokenizer are missing or out of range.
TokenFileInfo describe_token_file(const std::string& path);

// describe_token_file plus a pass over every token (in bounded memory) that finds the
// first value outside [0, vocab_size) and names its index.
TokenFileInfo open_token_file(const std::string& path);

struct TokenFileAttributes {
  std::string tokenizer = kByteTokenizer;
  int64_t vocab_size = kByteVocabulary;
  std::string source;  // written when not empty
};

// Writes /tokens (contiguous storage, so any window is one read) and the attributes.
// uint8 storage for `bytes`; uint16 storage for `tokens`. Replaces an existing file. The
// values are written as given (open_token_file is where they are checked).
void write_token_file(const std::string& path, std::span<const uint8_t> bytes, const TokenFileAttributes& attributes);
void write_token_file(const std::string& path, std::span<const uint16_t> tokens, const TokenFileAttributes& attributes);

}  // namespace mirrored::data
