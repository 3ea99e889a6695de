#pragma once
// The images of a file larger than its memory budget, read on demand. Samples are read in
// blocks of consecutive samples (one HDF5 hyperslab read each) into a bounded
// least-recently-used cache, so memory stays within the budget however large the file is
// and a shuffled epoch re-reads only what was evicted. Pixels are held as the in-memory
// reader holds them (bytes, or float32), so a batch has the same bits either way. Every
// public member is safe to call from several threads (a device prefetcher's worker and the
// main thread). Reads from a thread other than the one that opened the file race with the
// HDF5 calls of that thread (a checkpoint being written) unless HDF5 is built thread-safe,
// as Debian's is; with one that is not, such a read is refused with an error that says so.
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace mirrored::data {

namespace detail {
class ImageSlabReader;
}

struct ImageCacheOptions {
  // Bytes of pixels (as held: 1 per uint8 pixel, 4 per float32) the cache may hold. The
  // effective capacity is at least two blocks.
  int64_t cache_bytes = int64_t{256} << 20;
  // Samples per block; 0 picks one: the file's HDF5 chunk when it is chunked and two fit in
  // the budget (a block then inflates exactly one chunk), else about 64 KiB of samples,
  // shrunk so the cache holds at least 16 blocks.
  int64_t block_samples = 0;
};

struct ImageCacheStats {
  int64_t block_samples = 0;
  int64_t capacity_bytes = 0;       // the bound on resident blocks
  int64_t resident_bytes = 0;       // now
  int64_t peak_resident_bytes = 0;  // the most ever held at once
  int64_t hits = 0;                 // a sample's block was resident
  int64_t misses = 0;               // it had to be read
};

class ImageCache {
 public:
  // Pixels of consecutive samples, as held: `bytes` for integer pixels, `floats` for float ones.
  struct Block {
    std::vector<uint8_t> bytes;
    std::vector<float> floats;
  };
  // A sample's pixels: the block that holds them (kept alive while the caller reads) and
  // the offset of its first pixel in that block.
  struct Sample {
    std::shared_ptr<const Block> block;
    int64_t offset = 0;
  };

  // Opens /images of `path` for [num_samples, sample_numel...] pixels; `floats` says which
  // way they are held. Integer pixels wider than a byte are narrowed with a range check.
  ImageCache(const std::string& path, int64_t num_samples, int64_t sample_numel, bool floats,
             ImageCacheOptions options);
  ~ImageCache();
  ImageCache(const ImageCache&) = delete;
  ImageCache& operator=(const ImageCache&) = delete;

  bool floats() const { return floats_; }
  Sample sample(int64_t index);
  // Reads every block once in order, without caching, and hands each to `visit` with the
  // index of its first sample: how a file is validated without holding it.
  void scan(const std::function<void(int64_t first_sample, const Block& block)>& visit) const;
  ImageCacheStats stats() const;

 private:
  struct Entry {
    std::shared_ptr<const Block> data;
    std::list<int64_t>::iterator recency;  // position in lru_
  };

  int64_t block_count() const { return (num_samples_ + block_samples_ - 1) / block_samples_; }
  int64_t block_bytes(int64_t index) const;
  std::shared_ptr<Block> read_block(int64_t index) const;

  std::string path_;
  int64_t num_samples_;
  int64_t sample_numel_;
  bool floats_;
  bool hdf5_thread_safe_ = false;
  std::thread::id opener_;  // the only thread that may read when HDF5 is not thread-safe
  std::unique_ptr<detail::ImageSlabReader> reader_;
  int64_t block_samples_ = 0;
  int64_t capacity_bytes_ = 0;

  mutable std::mutex mutex_;  // guards the blocks and the reader (one read at a time)
  std::unordered_map<int64_t, Entry> blocks_;
  std::list<int64_t> lru_;    // resident blocks, most recently used first
  int64_t resident_bytes_ = 0;
  ImageCacheStats stats_;
};

}  // namespace mirrored::data
