#include "mirrored/data/shard_list.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <system_error>

#include "mirrored/core/error.h"
#include "mirrored/core/strings.h"
#include "mirrored/data/text_import.h"

namespace mirrored::data {
namespace {

namespace fs = std::filesystem;

// Bounds a glob's listing: a folder of more files is a mistake (the root of a disk), and
// each shard opened costs an open HDF5 file.
constexpr size_t kMaxShards = 100000;

bool has_wildcard(const std::string& text) { return text.find_first_of("*?") != std::string::npos; }

// The regular files of one folder whose names match `pattern`, sorted by name.
std::vector<std::string> glob_folder(const std::string& spec, const std::string& entry) {
  const fs::path pattern_path(entry);
  const std::string folder = pattern_path.has_parent_path() ? pattern_path.parent_path().string() : ".";
  const std::string name_pattern = pattern_path.filename().string();
  if (has_wildcard(folder))
    throw InputError(str_cat("'", spec, "': the glob '", entry, "' has a wildcard in its folder '", folder,
                             "'; expected wildcards in the file name only (shards of one folder)"),
                     ExitCode::kUsage);
  std::vector<std::string> matches;
  std::error_code error;
  fs::directory_iterator it(folder, error);
  if (error)
    throw InputError(str_cat("'", spec, "': cannot list the folder '", folder, "' of '", entry, "': ",
                             error.message()));
  for (const fs::directory_entry& file : it) {
    const std::string name = file.path().filename().string();
    if (!glob_match(name_pattern, name)) continue;
    // symlink_status: a symlink is neither followed nor taken.
    if (!fs::is_regular_file(file.symlink_status(error))) continue;
    matches.push_back(pattern_path.has_parent_path() ? (fs::path(folder) / name).string() : name);
    if (matches.size() > kMaxShards)
      throw InputError(str_cat("'", spec, "': '", entry, "' matches more than ", kMaxShards, " files"));
  }
  if (matches.empty())
    throw InputError(str_cat("'", spec, "': no regular file in '", folder, "' matches '", name_pattern, "'"));
  std::sort(matches.begin(), matches.end());
  return matches;
}

}  // namespace

bool names_shards(const std::string& spec) {
  std::error_code error;
  if (fs::exists(spec, error)) return false;
  return spec.find(',') != std::string::npos || has_wildcard(spec);
}

std::vector<std::string> expand_shards(const std::string& spec) {
  if (!names_shards(spec)) return {spec};
  std::vector<std::string> shards;
  for (const std::string& entry : split(spec, ',')) {
    if (entry.empty())
      throw InputError(str_cat("'", spec, "': an empty entry in the list of shards (expected FILE,FILE,... "
                               "or a glob such as DIR/train-*.h5)"),
                       ExitCode::kUsage);
    if (has_wildcard(entry)) {
      const std::vector<std::string> matches = glob_folder(spec, entry);
      shards.insert(shards.end(), matches.begin(), matches.end());
    } else {
      shards.push_back(entry);
    }
  }
  std::set<std::string> seen;
  for (const std::string& shard : shards) {
    std::error_code error;
    const std::string key = fs::weakly_canonical(shard, error).string();
    if (!seen.insert(error ? shard : key).second)
      throw InputError(str_cat("'", spec, "': the shard '", shard, "' is named twice; each file may appear once"),
                       ExitCode::kUsage);
  }
  return shards;
}

std::string first_shard(const std::string& spec) {
  try {
    return expand_shards(spec).front();
  } catch (const InputError&) {
    return spec;
  }
}

}  // namespace mirrored::data
