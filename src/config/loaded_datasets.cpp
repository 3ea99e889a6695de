#include "mirrored/config/loaded_datasets.h"

#include <sys/stat.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "mirrored/data/shard_list.h"

namespace mirrored::config {
namespace {

// What tells a file read earlier from one replaced since (core/file_replacement.h writes a
// new inode; an append changes the size and the time).
struct FileIdentity {
  dev_t device = 0;
  ino_t inode = 0;
  off_t size = 0;
  int64_t modified_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};

// Every shard's identity, or nothing when one cannot be read (the loader then says why).
std::vector<FileIdentity> identify(const std::string& path) {
  std::vector<FileIdentity> ids;
  try {
    for (const std::string& shard : data::expand_shards(path)) {
      struct stat info {};
      if (::stat(shard.c_str(), &info) != 0) return {};
      ids.push_back({info.st_dev, info.st_ino, info.st_size,
                     static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec});
    }
  } catch (const std::exception&) {
    return {};
  }
  return ids;
}

struct Kept {
  std::string path;
  int64_t cache_mb = 0;
  std::vector<FileIdentity> files;
  std::shared_ptr<const data::Dataset> dataset;
};

// Never destroyed: the process may end (std::exit) while a thread still reads them.
std::mutex& mutex = *new std::mutex;
bool keeping = false;
std::vector<Kept>& kept = *new std::vector<Kept>;  // a run reads two files at most: train and test

}  // namespace

void keep_loaded_datasets() {
  std::lock_guard<std::mutex> lock(mutex);
  keeping = true;
}

std::shared_ptr<const data::Dataset> load_or_reuse(const std::string& path, int64_t cache_mb, const DatasetLoader& load) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!keeping) return load();
  }
  const std::vector<FileIdentity> before = identify(path);
  std::lock_guard<std::mutex> lock(mutex);
  const auto entry = std::find_if(kept.begin(), kept.end(),
                                  [&](const Kept& k) { return k.path == path && k.cache_mb == cache_mb; });
  if (entry != kept.end() && !before.empty() && entry->files == before) return entry->dataset;
  if (entry != kept.end()) kept.erase(entry);
  std::shared_ptr<const data::Dataset> dataset = load();
  if (!before.empty() && identify(path) == before) kept.push_back({path, cache_mb, before, dataset});
  return dataset;
}

}  // namespace mirrored::config
