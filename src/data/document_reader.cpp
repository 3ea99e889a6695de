#include "mirrored/data/document_reader.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "mirrored/core/error.h"
#include "mirrored/core/strings.h"
#include "mirrored/data/decompressing_reader.h"
#include "mirrored/io/jsonl_reader.h"

namespace mirrored::data {
namespace {

constexpr size_t kDocumentChunkBytes = size_t{1} << 20;

// A text file: each decompressed buffer goes straight onto the end of the corpus.
void append_text(DecompressingReader& reader, std::vector<uint8_t>& corpus, DocumentReadStats& stats,
                 const ReadProgress& progress) {
  for (;;) {
    const size_t before = corpus.size();
    corpus.resize(before + kDocumentChunkBytes);
    const size_t got = reader.read(corpus.data() + before, kDocumentChunkBytes);
    corpus.resize(before + got);
    if (got == 0) break;
    stats.text_bytes += static_cast<int64_t>(got);
    if (progress) progress(static_cast<int64_t>(reader.file_bytes_read()), stats.text_bytes);
  }
  stats.documents = 1;
}

// One JSON-lines record: its field's string onto the corpus; blank lines are skipped.
void append_record(std::string_view line, const std::string& field, const std::string& origin,
                   std::vector<uint8_t>& corpus, DocumentReadStats& stats) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (trim(line).empty()) return;
  const std::string text = io::json_string_field(line, field, origin);
  corpus.insert(corpus.end(), text.begin(), text.end());
  stats.text_bytes += static_cast<int64_t>(text.size());
  ++stats.documents;
}

// A JSON-lines file, split into lines across buffers: a line is parsed once whole.
void append_jsonl(DecompressingReader& reader, const std::string& field, std::vector<uint8_t>& corpus,
                  DocumentReadStats& stats, const ReadProgress& progress) {
  std::vector<uint8_t> buffer(kDocumentChunkBytes);
  std::string line;  // the line being read, without its '\n'
  int64_t number = 1;
  const auto origin = [&] { return str_cat(reader.path(), ":", number); };
  for (;;) {
    const size_t got = reader.read(buffer.data(), buffer.size());
    if (got == 0) break;
    const char* at = reinterpret_cast<const char*>(buffer.data());
    const char* end = at + got;
    while (at < end) {
      const char* newline = static_cast<const char*>(std::memchr(at, '\n', static_cast<size_t>(end - at)));
      const char* stop = newline ? newline : end;
      if (line.empty() && newline && static_cast<size_t>(stop - at) <= kMaxJsonlLineBytes) {
        // The whole line is in the buffer: parsed where it lies, without a copy.
        append_record(std::string_view(at, static_cast<size_t>(stop - at)), field, origin(), corpus, stats);
        ++number;
        at = stop + 1;
        continue;
      }
      if (line.size() + static_cast<size_t>(stop - at) > kMaxJsonlLineBytes) {
        throw InputError(str_cat(origin(), ": a line longer than ", kMaxJsonlLineBytes >> 20,
                                 " MiB (expected one JSON record a line)"));
      }
      line.append(at, stop);
      at = stop;
      if (newline) {
        append_record(line, field, origin(), corpus, stats);
        line.clear();
        ++number;
        ++at;
      }
    }
    if (progress) progress(static_cast<int64_t>(reader.file_bytes_read()), stats.text_bytes);
  }
  append_record(line, field, origin(), corpus, stats);  // a last line without '\n'
}

}  // namespace

DocumentReadStats append_documents(const TextSource& source, const std::string& jsonl_field,
                                   std::vector<uint8_t>& corpus, const ReadProgress& progress) {
  MIRRORED_CHECK(source.format != TextFormat::kArchive, source.path, " is an archive");
  if (source.format == TextFormat::kJsonl && jsonl_field.empty()) {
    throw InputError(str_cat("'", source.path, "': a JSON-lines file needs --field NAME (the field holding each "
                             "record's text)"),
                     ExitCode::kUsage);
  }
  DecompressingReader reader(source.path, /*follow_symlinks=*/!source.walked);
  DocumentReadStats stats;
  if (source.format == TextFormat::kJsonl) {
    append_jsonl(reader, jsonl_field, corpus, stats, progress);
  } else {
    append_text(reader, corpus, stats, progress);
  }
  stats.file_bytes = static_cast<int64_t>(reader.file_bytes_read());
  return stats;
}

}  // namespace mirrored::data
