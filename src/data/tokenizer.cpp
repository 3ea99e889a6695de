#include "mirrored/data/tokenizer.h"

#if MIRRORED_WITH_SENTENCEPIECE
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#else
namespace sentencepiece {
class SentencePieceProcessor {};  // never made: every entry point below says why
}
#endif

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>
#include <unordered_map>

#include "mirrored/core/error.h"
#include "mirrored/core/file_replacement.h"
#include "mirrored/core/sha256.h"
#include "mirrored/data/token_file.h"

#if MIRRORED_WITH_SENTENCEPIECE
// Not in the installed headers, but exported by libsentencepiece: its trainer logs every
// stage at INFO level to stderr, which would bury the import's own lines.
namespace sentencepiece::logging {
void SetMinLogLevel(int level);
}
#endif

namespace mirrored::data {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kSpaceMark = "\xe2\x96\x81";  // U+2581, SentencePiece's space

// Bytes of the valid UTF-8 character at text[i] (RFC 3629: no overlong forms, surrogates or
// code points above U+10FFFF), or 0 when the byte there starts no valid character.
size_t utf8_char_length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  size_t length = 0;
  unsigned char low = 0x80, high = 0xbf;  // the allowed range of the second byte
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead == 0xe0) low = 0xa0;
    if (lead == 0xed) high = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead == 0xf0) low = 0x90;
    if (lead == 0xf4) high = 0x8f;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  if (byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (size_t k = 2; k < length; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xbf) return 0;
  return length;
}

// Bytes of the character SentencePiece may see at text[i]: 0 for a byte that goes to its
// byte piece instead (invalid UTF-8, NUL, U+2581).
size_t model_char_length(std::string_view text, size_t i) {
  if (text[i] == '\0') return 0;
  const size_t length = utf8_char_length(text, i);
  if (length == kSpaceMark.size() && text.substr(i, length) == kSpaceMark) return 0;
  return length;
}

// Calls run(piece) for each maximal span of model characters that ends at the latest at a
// newline (which it includes), and byte(b) for each byte in between, in text order.
template <typename Run, typename Byte>
void for_each_run(std::string_view text, Run&& run, Byte&& byte) {
  size_t start = 0, i = 0;
  while (i < text.size()) {
    const size_t length = model_char_length(text, i);
    if (length == 0) {
      if (i > start) run(text.substr(start, i - start));
      byte(static_cast<unsigned char>(text[i]));
      start = ++i;
      continue;
    }
    i += length;
    if (text[i - 1] == '\n') {
      run(text.substr(start, i - start));
      start = i;
    }
  }
  if (i > start) run(text.substr(start, i - start));
}

#if MIRRORED_WITH_SENTENCEPIECE
// The training sentences: each run without its newline, empty ones left out.
class RunIterator final : public sentencepiece::SentenceIterator {
 public:
  explicit RunIterator(std::string_view text) {
    for_each_run(
        text,
        [&](std::string_view run) {
          if (!run.empty() && run.back() == '\n') run.remove_suffix(1);
          if (!run.empty()) runs_.emplace_back(run);
        },
        [](unsigned char) {});
  }
  bool done() const override { return next_ >= runs_.size(); }
  void Next() override { ++next_; }
  const std::string& value() const override { return runs_[next_]; }
  sentencepiece::util::Status status() const override { return {}; }
  size_t size() const { return runs_.size(); }

 private:
  std::vector<std::string> runs_;
  size_t next_ = 0;
};

// A SentencePiece model of 65536 pieces takes a few MiB; a file this large is something else.
constexpr std::uintmax_t kMaxModelBytes = std::uintmax_t{256} << 20;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(str_cat("cannot open the tokenizer model '", path, "' for reading"));
  std::error_code error;
  const std::uintmax_t size = fs::file_size(path, error);
  if (!error && size > kMaxModelBytes)
    throw InputError(str_cat("'", path, "': ", size, " bytes, more than a tokenizer model's ", kMaxModelBytes,
                             " (expected a SentencePiece .model file)"));
  std::string bytes;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    bytes.append(buffer, static_cast<size_t>(in.gcount()));
    if (bytes.size() > kMaxModelBytes)
      throw InputError(str_cat("'", path, "': more than a tokenizer model's ", kMaxModelBytes, " bytes"));
  }
  if (in.bad()) throw InputError(str_cat("'", path, "': read error"));
  return bytes;
}

std::string piece_bytes(const sentencepiece::SentencePieceProcessor& processor, int id) {
  if (processor.IsControl(id) || processor.IsUnknown(id)) return "";
  const std::string& piece = processor.IdToPiece(id);
  if (processor.IsByte(id)) {  // "<0xNN>"
    unsigned value = 0;
    if (piece.size() != 6 || std::sscanf(piece.c_str(), "<0x%2X>", &value) != 1) return "";
    return std::string(1, static_cast<char>(value));
  }
  std::string out;
  for (size_t i = 0; i < piece.size();) {
    if (piece.compare(i, kSpaceMark.size(), kSpaceMark) == 0) {
      out.push_back(' ');
      i += kSpaceMark.size();
    } else {
      out.push_back(piece[i++]);
    }
  }
  return out;
}
#else
[[noreturn]] void no_sentencepiece() {
  throw InputError("this mirrored was built without SentencePiece, so it reads and writes byte tokens only; install "
                   "libsentencepiece-dev (launch/install_deps.sh) and rebuild",
                   ExitCode::kUsage);
}
#endif

}  // namespace

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

#if MIRRORED_WITH_SENTENCEPIECE
bool Tokenizer::has_sentencepiece() { return true; }
#else
bool Tokenizer::has_sentencepiece() { return false; }
#endif

Tokenizer Tokenizer::bytes() {
  Tokenizer tokenizer;
  tokenizer.name_ = kByteTokenizer;
  for (int b = 0; b < 256; ++b) {
    tokenizer.pieces_.emplace_back(1, static_cast<char>(b));
    tokenizer.byte_ids_[b] = b;
  }
  return tokenizer;
}

#if MIRRORED_WITH_SENTENCEPIECE
Tokenizer Tokenizer::load_sentencepiece(const std::string& model_path) {
  return from_serialized(read_file(model_path), model_path);
}

Tokenizer Tokenizer::copy_sentencepiece(const std::string& from, const std::string& to) {
  const std::string serialized = read_file(from);
  from_serialized(serialized, from);  // checked before it is copied
  replace_file(to, serialized);
  return from_serialized(serialized, to);
}

Tokenizer Tokenizer::from_serialized(const std::string& serialized, const std::string& model_path) {
  Tokenizer tokenizer;
  tokenizer.name_ = kSentencePieceTokenizer;
  tokenizer.model_path_ = model_path;
  tokenizer.model_sha256_ = sha256_hex(serialized);
  tokenizer.processor_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto status = tokenizer.processor_->LoadFromSerializedProto(serialized);
  if (!status.ok())
    throw InputError(str_cat("'", model_path, "': not a SentencePiece model (", status.ToString(), ")"));
  const sentencepiece::SentencePieceProcessor& processor = *tokenizer.processor_;
  const int size = processor.GetPieceSize();
  if (size > kMaxVocabulary)
    throw InputError(str_cat("'", model_path, "': ", size, " pieces; token files hold at most ", kMaxVocabulary));
  for (int id = 0; id < size; ++id) tokenizer.pieces_.push_back(piece_bytes(processor, id));
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    const int id = processor.PieceToId(name);
    if (!processor.IsByte(id))
      throw InputError(str_cat("'", model_path, "': the model has no byte piece ", name,
                               " (expected a model trained with byte_fallback, so that every byte has a token)"));
    tokenizer.byte_ids_[b] = id;
  }
  // A model that normalises text, or adds a space before each input, cannot give back the
  // bytes it was given; say so now rather than write token files that decode to other text.
  const std::string probe = "Ab  c\td,\n\nEf g";
  const std::string decoded = tokenizer.decode(tokenizer.encode(probe));
  if (decoded != probe)
    throw InputError(str_cat("'", model_path, "': the model does not reproduce text exactly (\"", probe,
                             "\" decodes to \"", decoded, "\"); expected one that normalises nothing, as "
                             "`mirrored data import-text --tokenizer sentencepiece` trains (spm_train "
                             "--normalization_rule_name=identity --add_dummy_prefix=false "
                             "--remove_extra_whitespaces=false --byte_fallback=true)"));
  return tokenizer;
}

Tokenizer Tokenizer::train_sentencepiece(std::string_view text, const SentencePieceTraining& options,
                                         const std::string& model_path) {
  if (options.model_type != "bpe" && options.model_type != "unigram")
    throw InputError(str_cat("--model_type '", options.model_type, "': expected bpe or unigram"), ExitCode::kUsage);
  if (options.vocab_size <= kByteVocabulary || options.vocab_size > kMaxVocabulary)
    throw InputError(str_cat("--vocab_size ", options.vocab_size, ": expected ", kByteVocabulary + 1, " to ",
                             kMaxVocabulary, " (a piece for each of the 256 bytes, and more)"),
                     ExitCode::kUsage);
  RunIterator sentences(text);
  if (sentences.size() == 0)
    throw InputError("the training text has no line of valid UTF-8 to train a SentencePiece model on");
  const unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
  const std::unordered_map<std::string, std::string> spec = {
      {"vocab_size", std::to_string(options.vocab_size)},
      {"model_type", options.model_type},
      {"byte_fallback", "true"},
      {"character_coverage", "1.0"},
      {"normalization_rule_name", "identity"},
      {"add_dummy_prefix", "false"},
      {"remove_extra_whitespaces", "false"},
      {"allow_whitespace_only_pieces", "true"},
      {"split_digits", "true"},
      {"user_defined_symbols", "\n"},  // one token per line break, not its byte piece
      {"unk_id", "0"},
      {"bos_id", "-1"},
      {"eos_id", "-1"},
      {"pad_id", "-1"},
      {"num_threads", std::to_string(threads)}};
  sentencepiece::logging::SetMinLogLevel(1);
  std::string serialized;
  const auto status = sentencepiece::SentencePieceTrainer::Train(spec, &sentences, &serialized);
  if (!status.ok())
    throw InputError(str_cat("training a SentencePiece ", options.model_type, " model with --vocab_size ",
                             options.vocab_size, " failed: ", status.ToString()));
  replace_file(model_path, serialized);
  return from_serialized(serialized, model_path);
}

void Tokenizer::encode_run(std::string_view run, std::vector<int32_t>& out) const {
  std::vector<int> ids;
  const auto status = processor_->Encode(run, &ids);
  MIRRORED_CHECK(status.ok(), "SentencePiece encode: ", status.ToString());
  out.insert(out.end(), ids.begin(), ids.end());
}
#else
Tokenizer Tokenizer::load_sentencepiece(const std::string&) { no_sentencepiece(); }
Tokenizer Tokenizer::copy_sentencepiece(const std::string&, const std::string&) { no_sentencepiece(); }
Tokenizer Tokenizer::train_sentencepiece(std::string_view, const SentencePieceTraining&, const std::string&) {
  no_sentencepiece();
}
void Tokenizer::encode_run(std::string_view, std::vector<int32_t>&) const { no_sentencepiece(); }
#endif

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  if (!processor_) {
    out.reserve(text.size());
    for (const char c : text) out.push_back(static_cast<unsigned char>(c));
    return out;
  }
  for_each_run(
      text, [&](std::string_view run) { encode_run(run, out); }, [&](unsigned char b) { out.push_back(byte_ids_[b]); });
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> tokens) const {
  std::string out;
  for (const int32_t token : tokens) {
    MIRRORED_CHECK(token >= 0 && token < vocab_size(), "token ", token, " outside the vocabulary of ", vocab_size());
    out += pieces_[static_cast<size_t>(token)];
  }
  return out;
}

std::vector<uint16_t> Tokenizer::token_byte_lengths() const {
  std::vector<uint16_t> lengths;
  lengths.reserve(pieces_.size());
  for (const std::string& piece : pieces_) lengths.push_back(static_cast<uint16_t>(piece.size()));
  return lengths;
}

}  // namespace mirrored::data
