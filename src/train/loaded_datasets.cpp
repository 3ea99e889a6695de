#include "mirrored/train/loaded_datasets.h"

#include <sys/stat.h>

#include <algorithm>

#include "mirrored/config/run_setup.h"
#include "mirrored/data/shard_list.h"

namespace mirrored::train {
namespace {

using FileIdentity = LoadedDatasets::FileIdentity;

// Every shard's identity, or nothing when one cannot be read (the loader then says why).
std::vector<FileIdentity> identify(const std::string& path) {
  std::vector<FileIdentity> ids;
  try {
    for (const std::string& shard : data::expand_shards(path)) {
      struct stat info {};
      if (::stat(shard.c_str(), &info) != 0) return {};
      ids.push_back({static_cast<uint64_t>(info.st_dev), static_cast<uint64_t>(info.st_ino),
                     static_cast<int64_t>(info.st_size),
                     static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec});
    }
  } catch (const std::exception&) {
    return {};
  }
  return ids;
}

}  // namespace

// The kept entry of (path, cache_mb, kind) when its files are unchanged; else `load` fills a
// new one, kept only when the files did not change while it was read.
template <typename Load>
const LoadedDatasets::Kept& LoadedDatasets::find_or_load(const std::string& path, int64_t cache_mb, bool want_tokens,
                                                         Load&& load) {
  const std::vector<FileIdentity> before = identify(path);
  const auto same = [&](const Kept& k) {
    return k.path == path && k.cache_mb == cache_mb && (k.tokens != nullptr) == want_tokens;
  };
  auto entry = std::find_if(kept_.begin(), kept_.end(), same);
  if (entry != kept_.end() && !before.empty() && entry->files == before) return *entry;
  if (entry != kept_.end()) kept_.erase(entry);
  Kept fresh{path, cache_mb, before, nullptr, nullptr};
  load(fresh);
  if (before.empty() || identify(path) != before) fresh.files.clear();  // never matches: read again next time
  kept_.push_back(std::move(fresh));
  return kept_.back();
}

std::shared_ptr<const data::Dataset> LoadedDatasets::images(const std::string& path, int64_t cache_mb) {
  if (!keep_) return config::load_dataset(path, cache_mb);
  return find_or_load(path, cache_mb, false, [&](Kept& k) { k.images = config::load_dataset(path, cache_mb); }).images;
}

std::shared_ptr<data::TokenDataset> LoadedDatasets::tokens(const std::string& path, int64_t cache_mb) {
  if (!keep_) return data::load_token_dataset(path, cache_mb);
  return find_or_load(path, cache_mb, true, [&](Kept& k) { k.tokens = data::load_token_dataset(path, cache_mb); })
      .tokens;
}

void LoadedDatasets::load_ahead(const config::LibraryOptions& lib, bool with_eval) {
  const bool gpt = lib.model.kind == config::ModelKind::kGpt;
  for (const std::string* path : {&lib.data.train, &lib.data.test}) {
    if (path->empty() || (path == &lib.data.test && !with_eval)) continue;
    if (gpt) {
      (void)tokens(*path, lib.data.cache_mb);
    } else {
      (void)images(*path, lib.data.cache_mb);
    }
  }
}

}  // namespace mirrored::train
