#pragma once
// The text of one file found by text_sources.h, appended to a corpus as it is read (and
// decompressed, decompressing_reader.h), a buffer at a time:
//   - a text file contributes its bytes as they are;
//   - a JSON-lines file contributes, for every non-blank line, the string of the record's
//     field `jsonl_field` (io/jsonl_reader.h's json_string_field: strict JSON, other fields
//     of any shape skipped), as UTF-8, with nothing between documents: documents are joined
//     exactly as files are (the corpus is the plain concatenation), so a record holding a
//     file's text gives the same tokens as the file. Lines may end in \n or \r\n; a line
//     longer than 256 MiB is refused (a record that size is not a document).
// Errors are InputErrors naming the file, and for a record its line: "a.jsonl.gz:17: ...".
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "mirrored/data/text_sources.h"

namespace mirrored::data {

inline constexpr size_t kMaxJsonlLineBytes = size_t{256} << 20;

struct DocumentReadStats {
  int64_t text_bytes = 0;  // appended to the corpus
  int64_t file_bytes = 0;  // read from disk (compressed, when the file is)
  int64_t documents = 0;   // jsonl records (1 for a text file)
};

// Called after each buffer with the file's bytes read from disk so far (for progress).
using ReadProgress = std::function<void(int64_t file_bytes, int64_t text_bytes)>;

// `source.format` is kText or kJsonl. A .jsonl source needs a non-empty `jsonl_field`
// (InputError, naming the file and --field, otherwise).
DocumentReadStats append_documents(const TextSource& source, const std::string& jsonl_field,
                                   std::vector<uint8_t>& corpus, const ReadProgress& progress = {});

}  // namespace mirrored::data
