#include "mirrored/data/text_sources.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>

#include "mirrored/core/error.h"
#include "mirrored/core/strings.h"
#include "mirrored/data/decompressing_reader.h"

namespace mirrored::data {
namespace {

namespace fs = std::filesystem;

constexpr const char* kOtherName = "not .txt/.md/.jsonl[.gz|.zst]";

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// The name's extension once a .gz or .zst is taken off, lowercase: ".jsonl" for "a.JSONL.zst".
std::string content_extension(const std::string& path) {
  return lower(fs::path(without_compression_extension(path)).extension().string());
}

// One directory's readable files, sorted by their path relative to `root`; the rest in
// `skipped`. The walk does not enter symlinked directories (directory_options::none).
std::vector<TextSource> walk_directory(const std::string& root, std::vector<SkippedFile>& skipped) {
  std::vector<std::pair<std::string, std::string>> found;  // (relative path, path)
  try {
    for (fs::recursive_directory_iterator it(root, fs::directory_options::none), end; it != end; ++it) {
      const fs::path& path = it->path();
      const fs::file_status status = it->symlink_status();
      if (fs::is_directory(status)) continue;  // entered by the iterator
      if (fs::is_symlink(status)) {
        skipped.push_back({path.string(), "a symlink"});
      } else if (!fs::is_regular_file(status)) {
        skipped.push_back({path.string(), "not a regular file"});
      } else if (!is_walked_text_name(path.filename().string())) {
        skipped.push_back({path.string(), kOtherName});
      } else {
        found.emplace_back(path.lexically_relative(root).generic_string(), path.string());
      }
    }
  } catch (const fs::filesystem_error& error) {
    throw InputError(str_cat("cannot list '", error.path1().empty() ? root : error.path1().string(),
                             "': ", error.code().message()));
  }
  // Byte order of the relative paths: the same on every machine, whatever the locale or the
  // order the file system lists entries in.
  std::sort(found.begin(), found.end());
  std::sort(skipped.begin(), skipped.end(), [](const SkippedFile& a, const SkippedFile& b) { return a.path < b.path; });
  std::vector<TextSource> files;
  for (auto& [relative, path] : found) files.push_back({std::move(path), text_format_of(relative), /*walked=*/true});
  return files;
}

}  // namespace

TextFormat text_format_of(const std::string& path) {
  const std::string extension = lower(fs::path(path).extension().string());
  if (extension == ".whl" || extension == ".zip") return TextFormat::kArchive;
  return content_extension(path) == ".jsonl" ? TextFormat::kJsonl : TextFormat::kText;
}

bool is_walked_text_name(const std::string& path) {
  const std::string extension = content_extension(path);
  return extension == ".txt" || extension == ".md" || extension == ".jsonl";
}

TextSources find_text_sources(const std::vector<std::string>& inputs) {
  TextSources sources;
  for (const std::string& input : inputs) {
    std::error_code error;
    if (!fs::is_directory(input, error)) {
      sources.files.push_back({input, text_format_of(input), /*walked=*/false});
      continue;
    }
    std::vector<SkippedFile> skipped;
    std::vector<TextSource> files = walk_directory(input, skipped);
    if (files.empty()) {
      throw InputError(str_cat("'", input, "': no .txt, .md or .jsonl file (alone or .gz/.zst) below the directory",
                               skipped.empty() ? "" : str_cat("; ", describe_skipped(skipped))));
    }
    sources.files.insert(sources.files.end(), files.begin(), files.end());
    sources.skipped.insert(sources.skipped.end(), skipped.begin(), skipped.end());
  }
  return sources;
}

std::string describe_skipped(const std::vector<SkippedFile>& skipped, size_t names_per_reason) {
  std::map<std::string, std::vector<std::string>> by_reason;
  for (const SkippedFile& file : skipped) by_reason[file.reason].push_back(file.path);
  std::vector<std::string> parts;
  for (const auto& [reason, paths] : by_reason) {
    std::vector<std::string> named(paths.begin(), paths.begin() + static_cast<std::ptrdiff_t>(std::min(paths.size(), names_per_reason)));
    if (paths.size() > named.size()) named.push_back("...");
    parts.push_back(str_cat(paths.size(), " ", reason, " (", join(named, ", "), ")"));
  }
  return str_cat(skipped.size(), " skipped: ", join(parts, ", "));
}

}  // namespace mirrored::data
