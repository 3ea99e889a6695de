#pragma once
// The images of a file (or of several shards read as one set) larger than its memory
// budget, read on demand through the block cache (block_cache.h), one source per shard: blocks of consecutive samples, one HDF5 hyperslab read each, in a
// least-recently-used cache bounded in bytes, so memory stays within the budget however
// large the file is and a shuffled epoch re-reads only what was evicted. Pixels are held
// as the in-memory reader holds them (bytes, or float32), so a batch has the same bits
// either way. Every public member is safe to call from several threads (a device
// prefetcher's worker and the main thread). Reads from a thread other than the one that
// opened the file race with the HDF5 calls of that thread (a checkpoint being written)
// unless HDF5 is built thread-safe, as Debian's is; with one that is not, such a read is
// refused with an error that says so.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "mirrored/data/block_cache.h"

namespace mirrored::data {

struct ImageCacheOptions {
  // Bytes of pixels (as held: 1 per uint8 pixel, 4 per float32) the cache may hold. The
  // effective capacity is at least two blocks.
  int64_t cache_bytes = int64_t{256} << 20;
  // Samples per block; 0 picks one: the file's HDF5 chunk when it is chunked and two fit in
  // the budget (a block then inflates exactly one chunk), else about 64 KiB of samples,
  // shrunk so the cache holds at least 16 blocks.
  int64_t block_samples = 0;
};

struct ImageCacheStats : BlockCacheStats {
  int64_t block_samples = 0;  // of the first shard (each shard's chunking picks its own)
};

// One file of a sharded set and the samples its /images holds.
struct ImageShard {
  std::string path;
  int64_t samples = 0;
};

class ImageCache {
 public:
  // A sample's pixels: the block that holds them (kept alive while the caller reads; its
  // pixels are bytes, or floats when floats()) and the offset of its first pixel there.
  struct Sample {
    std::shared_ptr<const Block> block;
    int64_t offset = 0;
  };

  // Opens /images of `path` for [num_samples, sample_numel...] pixels; `floats` says which
  // way they are held. Integer pixels wider than a byte are narrowed with a range check.
  ImageCache(const std::string& path, int64_t num_samples, int64_t sample_numel, bool floats,
             ImageCacheOptions options);
  // The shards as one set: sample i of the set is sample i - (the samples of the shards
  // before it) of its shard. Every shard holds samples of `sample_numel` pixels.
  ImageCache(std::vector<ImageShard> shards, int64_t sample_numel, bool floats, ImageCacheOptions options);
  ~ImageCache();
  ImageCache(const ImageCache&) = delete;
  ImageCache& operator=(const ImageCache&) = delete;

  bool floats() const { return floats_; }
  Sample sample(int64_t index);
  // Reads every block of every shard once in order, without caching, and hands each to
  // `visit` with the index in the set of its first sample (block.first_item() counts within
  // its shard) and its shard's path: how the files are validated without holding them.
  void scan(const std::function<void(const Block& block, int64_t first_sample, const std::string& path)>& visit) const;
  ImageCacheStats stats() const;

 private:
  std::string path_;             // the shards' paths, for messages
  std::vector<ImageShard> shards_;
  std::vector<int64_t> starts_;  // the set's index of each shard's first sample
  int64_t num_samples_ = 0;
  int64_t sample_numel_;
  bool floats_;
  bool hdf5_thread_safe_ = false;
  std::thread::id opener_;  // the only thread that may read when HDF5 is not thread-safe
  int64_t block_samples_ = 0;
  std::unique_ptr<BlockCache> cache_;
};

}  // namespace mirrored::data
