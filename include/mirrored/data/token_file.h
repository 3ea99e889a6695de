#pragma once
// The on-disk format of a token sequence (language-model data): an HDF5 file with
//   /tokens      uint8 [N] (vocabulary up to 256) or uint16 [N] (up to 65536)
// and attributes on the root group
//   tokenizer    string, how text became tokens ("bytes": one token per UTF-8 byte)
//   vocab_size   integer, every token lies in [0, vocab_size)
//   source       string, optional: what the tokens were made from
// and, for SentencePiece tokens (data/tokenizer.h; optional for other tokenizers),
//   tokenizer_model   string, the model file's name in the token file's own directory (a
//                     name: one with '/', or '.' or '..', is refused, naming the file)
//   tokenizer_sha256  string, the model file's SHA-256 (lowercase hex), which tells apart
//                     files encoded with different models
//   /token_bytes      int64 [vocab_size], the UTF-8 bytes each token decodes to (bits per
//                     byte divide by their sum, without needing the model file)
// The file is read in windows (hyperslabs), so it never has to fit in memory.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mirrored::data {

inline constexpr const char* kTokensDataset = "/tokens";
inline constexpr const char* kTokenBytesDataset = "/token_bytes";
inline constexpr const char* kByteTokenizer = "bytes";
inline constexpr int64_t kByteVocabulary = 256;
inline constexpr int64_t kMaxVocabulary = 65536;  // uint16 tokens

struct TokenFileInfo {
  std::string path;
  int64_t num_tokens = 0;
  int64_t vocab_size = 0;
  std::string tokenizer;
  std::string source;       // "" when the attribute is absent
  std::string tokenizer_model, tokenizer_sha256;  // "" for bytes
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
// first value outside [0, vocab_size) and names its index. (TokenDataset reads the tokens
// through the same open file it checked.)
TokenFileInfo open_token_file(const std::string& path);

// Says which tokenizer made the file: "bytes", or "sentencepiece (tokenizer.model, sha256
// 1a2b3c4d...)". Errors about mismatched files name both this way.
std::string describe_tokenizer(const TokenFileInfo& info);
// True when two files' tokens mean the same text: the same tokenizer and model digest.
bool same_tokenizer(const TokenFileInfo& a, const TokenFileInfo& b);

// The UTF-8 bytes each token decodes to ([vocab_size]): 1 for every byte token, else the
// file's /token_bytes; 1 too for a tokenizer mirrored does not know that left it out (bits
// per byte are then bits per token). InputError naming the file when a SentencePiece file
// lacks it or its shape is not [vocab_size].
std::vector<int64_t> read_token_byte_lengths(const TokenFileInfo& info);

struct TokenFileAttributes {
  std::string tokenizer = kByteTokenizer;
  int64_t vocab_size = kByteVocabulary;
  std::string source;  // written when not empty
  std::string tokenizer_model, tokenizer_sha256;  // written when not empty
  std::vector<int64_t> token_bytes;               // /token_bytes, written when not empty
};

// Writes /tokens (contiguous storage, so any window is one read) and the attributes.
// uint8 storage for `bytes`; uint16 storage for `tokens`. Replaces an existing file, whole or
// not at all (io::write_hdf5_file: Error(kWriteFailed) leaves it unchanged). The
// values are written as given (open_token_file is where they are checked).
void write_token_file(const std::string& path, std::span<const uint8_t> bytes, const TokenFileAttributes& attributes);
void write_token_file(const std::string& path, std::span<const uint16_t> tokens, const TokenFileAttributes& attributes);

}  // namespace mirrored::data
