#pragma once
// The one bounded block cache under the image and the token datasets. A dataset is one or
// more sources (files); each source is a run of fixed-size items (the samples of an image
// set, the tokens of a token file) read in blocks of consecutive items. Blocks are kept in
// a least-recently-used cache bounded in bytes: resident blocks and blocks being read
// together never exceed the capacity, so memory stays within the bound however large the
// data is, and a shuffled epoch rereads only what was evicted. A block is read on the
// thread that first asks for it, outside the lock, so a reader of a resident block never
// waits for a read; other threads asking for a block being read wait for it. With
// `prefetch`, a background thread reads the blocks announced with prefetch() while the
// caller works on the current ones. Every public member is safe to call from several
// threads, as far as the sources' reads are (a thread-safe HDF5 build serialises them).
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <unordered_map>
#include <vector>

namespace mirrored::data {

// One source's items, read in blocks of `block_items` (the last block may be shorter).
struct BlockSource {
  int64_t items = 0;
  int64_t item_bytes = 0;   // as held in memory
  int64_t block_items = 0;  // 1 to `items`
  // Reads items [first, first + count) into `out` (count * item_bytes bytes). Called on the
  // thread that asks for the block (the prefetch thread included), on several at once when
  // several read; what it throws reaches the caller that asked for the block.
  std::function<void(int64_t first, int64_t count, std::byte* out)> read;

  int64_t block_count() const { return (items + block_items - 1) / block_items; }
  int64_t block_bytes(int64_t block) const;
};

// Consecutive items of one source, held as the source's read wrote them. The storage is
// aligned for any scalar, so a block read as floats is read back as floats (as<float>()).
class Block {
 public:
  Block(int64_t first_item, int64_t items, int64_t bytes);
  int64_t first_item() const { return first_item_; }
  int64_t items() const { return items_; }
  int64_t bytes() const { return bytes_; }
  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  template <typename T>
  const T* as() const {
    return reinterpret_cast<const T*>(data_.get());
  }

 private:
  friend void for_each_block(const BlockSource& source, const std::function<void(const Block&)>& visit);

  int64_t first_item_;
  int64_t items_;
  int64_t bytes_;
  std::unique_ptr<std::byte[]> data_;
};

struct BlockCacheOptions {
  // Bytes the cache may hold, blocks being read included; 0: no bound (every block may
  // become resident). The capacity is at least two of the largest block, so a block larger
  // than the request still fits, and a reader holding one block can always read the next.
  int64_t capacity_bytes = int64_t{256} << 20;
  bool prefetch = false;  // a background thread serves prefetch(); without it, prefetch() does nothing
};

struct BlockCacheStats {
  int64_t capacity_bytes = 0;       // the bound: resident + loading blocks never exceed it
  int64_t resident_bytes = 0;       // now
  int64_t peak_resident_bytes = 0;  // the most ever held at once
  int64_t hits = 0;                 // a block asked for was resident (or being read by another thread)
  int64_t misses = 0;               // the caller had to read it
  int64_t prefetch_loads = 0;       // blocks the background thread read
};

// Items [first, first + count) of one source, as announced to prefetch().
struct ItemRange {
  int source = 0;
  int64_t first = 0;
  int64_t count = 0;
};

class BlockCache {
 public:
  explicit BlockCache(std::vector<BlockSource> sources, BlockCacheOptions options = {});
  ~BlockCache();
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  const BlockSource& source(int index) const { return sources_.at(static_cast<size_t>(index)); }
  int64_t capacity_bytes() const { return capacity_bytes_; }

  // The block of `source` that holds `item`, kept alive while the caller holds it (an
  // evicted block is freed when its last holder lets go; only resident blocks count
  // against the bound). Read on this thread unless resident or being read by another.
  std::shared_ptr<const Block> block_of(int source, int64_t item);

  // Asks the background thread to read the blocks covering `ranges`, in that order,
  // replacing any earlier request not yet served; returns at once. Only blocks up to half
  // the capacity are requested, so a prefetch cannot evict what it just read.
  void prefetch(std::span<const ItemRange> ranges);

  BlockCacheStats stats() const;

 private:
  struct Entry {
    std::shared_ptr<const Block> data;      // null while being read
    int64_t bytes = 0;
    std::list<int64_t>::iterator recency;   // position in lru_ once read
  };

  int64_t key(int source, int64_t block) const { return block * static_cast<int64_t>(sources_.size()) + source; }
  // The block, read on this thread if no other thread has it or is reading it. For the
  // prefetch thread (`demand` false) a block being read elsewhere is left alone (null).
  std::shared_ptr<const Block> load(int source, int64_t block, bool demand);
  // Under the lock: the resident block; or null with `reserved` set, after making room
  // and leaving a placeholder for this thread to read it; or, for the prefetch thread,
  // null when another thread is reading it. Waits while another thread reads the block a
  // demand asks for, or while every resident byte is still being read.
  std::shared_ptr<const Block> find_or_reserve(std::unique_lock<std::mutex>& lock, int64_t key, int64_t bytes,
                                               bool demand, bool& reserved);
  void prefetch_loop();

  std::vector<BlockSource> sources_;
  int64_t capacity_bytes_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable loaded_;        // a block finished reading (or failed)
  std::unordered_map<int64_t, Entry> blocks_;
  std::list<int64_t> lru_;                // read blocks, most recently used first
  int64_t resident_bytes_ = 0;
  BlockCacheStats stats_;

  std::condition_variable wanted_;        // a new prefetch request, or stopping
  std::deque<int64_t> pending_;           // keys the prefetch thread should read
  bool stopping_ = false;
  std::thread prefetcher_;
};

// Reads every block of `source` once, in order, into one reused buffer, without a cache,
// and hands each to `visit`: how a file is checked without holding it.
void for_each_block(const BlockSource& source, const std::function<void(const Block&)>& visit);

// How a dataset sizes its blocks when the caller does not. A block is one HDF5 chunk when
// the file is chunked and two fit in the cache (a block then inflates exactly one chunk);
// else `default_bytes` of items, shrunk to 1/`blocks_per_cache` of a bounded cache but
// never below `min_items`.
struct BlockSizing {
  int64_t default_bytes = int64_t{64} << 10;
  int64_t blocks_per_cache = 16;
  int64_t min_items = 1;
};
// Items per block for `items` items of `item_bytes` each (`chunk_items` 0: not chunked)
// behind a cache of `cache_bytes` (0: no bound); `requested` > 0 is taken as given. At
// most `items`.
int64_t pick_block_items(int64_t requested, int64_t chunk_items, int64_t item_bytes, int64_t items,
                         int64_t cache_bytes, const BlockSizing& sizing);

}  // namespace mirrored::data
