#pragma once
// How text becomes tokens and tokens text again, for the language model's data and for
// `mirrored generate`: bytes (one token per byte, vocabulary 256), or a SentencePiece
// model (BPE or unigram; Debian's libsentencepiece).
//
// A SentencePiece tokenizer here reproduces text exactly: decode(encode(text)) == text for
// any bytes. Its model normalises nothing (identity rule, no dummy prefix, spaces kept),
// has a piece for every byte (byte_fallback), and is applied line by line to the runs of
// valid UTF-8; a byte outside such a run (invalid UTF-8, NUL, or U+2581, the character
// SentencePiece writes for a space) becomes its byte piece. Decoding concatenates each
// token's bytes, so a token's byte length is a property of the token alone, which is what
// bits per byte counts.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace mirrored::data {

inline constexpr const char* kSentencePieceTokenizer = "sentencepiece";

struct SentencePieceTraining {
  int64_t vocab_size = 1024;
  std::string model_type = "bpe";  // "bpe" or "unigram"
};

class Tokenizer {
 public:
  // Whether this build has SentencePiece (CMake's MIRRORED_SENTENCEPIECE); without it the
  // two factories below throw InputError saying how to get it.
  static bool has_sentencepiece();
  static Tokenizer bytes();
  // A model file (.model, SentencePiece's serialized ModelProto). InputError naming the file
  // when it cannot be read or parsed, lacks byte pieces, or does not reproduce text exactly.
  static Tokenizer load_sentencepiece(const std::string& model_path);
  // load_sentencepiece(from), whose very bytes (read once) are then written to `to`, whole
  // or not at all (core/file_replacement.h); the tokenizer returned is `to`'s.
  static Tokenizer copy_sentencepiece(const std::string& from, const std::string& to);
  // Trains on `text` (its valid UTF-8 runs, line by line), writes the model to `model_path`
  // (whole or not at all) and returns it loaded. InputError naming the option for a vocabulary the text cannot
  // fill or one that needs more than uint16 tokens.
  static Tokenizer train_sentencepiece(std::string_view text, const SentencePieceTraining& options,
                                       const std::string& model_path);

  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  const std::string& name() const { return name_; }  // "bytes" or "sentencepiece"
  int64_t vocab_size() const { return static_cast<int64_t>(pieces_.size()); }
  const std::string& model_path() const { return model_path_; }  // "" for bytes
  const std::string& model_sha256() const { return model_sha256_; }

  std::vector<int32_t> encode(std::string_view text) const;
  // The tokens' bytes, concatenated. A token outside the vocabulary is a failed check.
  std::string decode(std::span<const int32_t> tokens) const;
  const std::string& token_bytes(int32_t token) const { return pieces_.at(static_cast<size_t>(token)); }
  // UTF-8 bytes each token decodes to, indexed by token.
  std::vector<uint16_t> token_byte_lengths() const;

 private:
  Tokenizer() = default;
  // The checks of load_sentencepiece on a model's bytes; `model_path` names it in messages.
  static Tokenizer from_serialized(const std::string& serialized, const std::string& model_path);
  void encode_run(std::string_view run, std::vector<int32_t>& out) const;

  std::string name_;
  std::string model_path_, model_sha256_;
  std::vector<std::string> pieces_;  // each token's bytes
  int32_t byte_ids_[256] = {};       // the token of each byte (bytes: the byte itself)
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;  // null for bytes
};

}  // namespace mirrored::data
