#pragma once
// The files a text import reads, found from the inputs given on the command line:
//   - a file is read as given, whatever its name (a symlink named by the user is followed);
//     .whl and .zip are archives (text_import.h), NAME.jsonl[.gz|.zst] is one JSON record a
//     line, anything else text; .gz and .zst are decompressed (decompressing_reader.h);
//   - a directory is walked as data from strangers: every regular file below it whose name
//     ends in .txt, .md or .jsonl, each alone or followed by .gz or .zst (case-insensitive),
//     in the byte order of their paths relative to the directory ('/'-separated), so the
//     same tree gives the same corpus on every machine and file system. Symlinks are never
//     followed (neither into directories nor to files; the files are later opened with
//     O_NOFOLLOW), and nothing else is read: symlinks, devices, FIFOs, sockets and other
//     names are skipped, and every skipped file is counted and named.
#include <cstdint>
#include <string>
#include <vector>

namespace mirrored::data {

enum class TextFormat { kText, kJsonl, kArchive };

struct TextSource {
  std::string path;
  TextFormat format = TextFormat::kText;
  bool walked = false;  // found in a directory: opened without following a symlink, skipped when empty
};

struct SkippedFile {
  std::string path;
  std::string reason;  // "a symlink", "not a regular file", "not .txt/.md/.jsonl[.gz|.zst]", "empty"
};

struct TextSources {
  std::vector<TextSource> files;  // in corpus order
  std::vector<SkippedFile> skipped;  // each directory's in path order
};

// The format a file's name says (above).
TextFormat text_format_of(const std::string& path);
// Whether a file found in a directory walk is read: .txt, .md, .jsonl, each alone or + .gz/.zst.
bool is_walked_text_name(const std::string& path);

// Every input in order, each directory replaced by its files. InputError naming the input:
// missing, a directory that cannot be listed, or a directory holding no file to read (the
// message says how many were skipped and why).
TextSources find_text_sources(const std::vector<std::string>& inputs);

// "3 skipped: 1 a symlink (a/link.txt), 2 not .txt/.md/.jsonl[.gz|.zst] (b.pdf, c.html)":
// each reason with its count and its first few paths, for the import's summary.
std::string describe_skipped(const std::vector<SkippedFile>& skipped, size_t names_per_reason = 3);

}  // namespace mirrored::data
