#include "mirrored/data/block_cache.h"

#include <algorithm>
#include <unordered_set>

#include "mirrored/core/error.h"

namespace mirrored::data {

int64_t BlockSource::block_bytes(int64_t block) const {
  return std::min(block_items, items - block * block_items) * item_bytes;
}

// Not zero-filled: every byte is written by the source's read before anyone sees it.
Block::Block(int64_t first_item, int64_t items, int64_t bytes)
    : first_item_(first_item),
      items_(items),
      bytes_(bytes),
      data_(std::make_unique_for_overwrite<std::byte[]>(static_cast<size_t>(bytes))) {}

BlockCache::BlockCache(std::vector<BlockSource> sources, BlockCacheOptions options) : sources_(std::move(sources)) {
  MIRRORED_CHECK(!sources_.empty(), "a block cache needs at least one source");
  MIRRORED_CHECK(options.capacity_bytes >= 0, "block cache of ", options.capacity_bytes, " bytes");
  int64_t largest_block = 0, total = 0;
  for (const BlockSource& source : sources_) {
    MIRRORED_CHECK(source.items > 0 && source.item_bytes > 0 && source.block_items > 0 &&
                       source.block_items <= source.items && source.read,
                   "block source of ", source.items, " items of ", source.item_bytes, " bytes in blocks of ",
                   source.block_items);
    largest_block = std::max(largest_block, source.block_bytes(0));
    total += source.items * source.item_bytes;
  }
  capacity_bytes_ = options.capacity_bytes == 0 ? total : std::max(options.capacity_bytes, 2 * largest_block);
  stats_.capacity_bytes = capacity_bytes_;
  if (options.prefetch) prefetcher_ = std::thread([this] { prefetch_loop(); });
}

BlockCache::~BlockCache() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wanted_.notify_all();
  if (prefetcher_.joinable()) prefetcher_.join();
}

std::shared_ptr<const Block> BlockCache::block_of(int source, int64_t item) {
  const BlockSource& from = this->source(source);
  MIRRORED_CHECK(item >= 0 && item < from.items, "item ", item, " outside block source ", source, " of ", from.items,
                 " items");
  return load(source, item / from.block_items, /*demand=*/true);
}

std::shared_ptr<const Block> BlockCache::find_or_reserve(std::unique_lock<std::mutex>& lock, int64_t id, int64_t bytes,
                                                         bool demand, bool& reserved) {
  bool waited = false;
  while (true) {
    const auto found = blocks_.find(id);
    if (found != blocks_.end()) {
      Entry& entry = found->second;
      if (entry.data) {
        lru_.splice(lru_.begin(), lru_, entry.recency);
        if (demand) ++stats_.hits;
        return entry.data;
      }
      if (!demand) return nullptr;  // another thread is reading it
      waited = true;
      loaded_.wait(lock);
      continue;
    }
    if (resident_bytes_ + bytes <= capacity_bytes_) break;
    if (!lru_.empty()) {
      const int64_t victim = lru_.back();
      lru_.pop_back();
      resident_bytes_ -= blocks_.at(victim).bytes;
      blocks_.erase(victim);
      continue;
    }
    loaded_.wait(lock);  // everything resident is still being read: wait for one to finish
  }
  // Not resident (a block another thread was reading may have failed or been evicted).
  blocks_.emplace(id, Entry{.data = nullptr, .bytes = bytes, .recency = {}});
  resident_bytes_ += bytes;
  stats_.peak_resident_bytes = std::max(stats_.peak_resident_bytes, resident_bytes_);
  if (!demand) {
    ++stats_.prefetch_loads;
  } else if (waited) {
    ++stats_.hits;
  } else {
    ++stats_.misses;
  }
  reserved = true;
  return nullptr;
}

std::shared_ptr<const Block> BlockCache::load(int source, int64_t block, bool demand) {
  const BlockSource& from = sources_[static_cast<size_t>(source)];
  const int64_t bytes = from.block_bytes(block);
  const int64_t id = key(source, block);
  std::unique_lock lock(mutex_);
  bool reserved = false;
  std::shared_ptr<const Block> found = find_or_reserve(lock, id, bytes, demand, reserved);
  if (found || !reserved) return found;
  lock.unlock();

  std::shared_ptr<Block> data;
  try {
    const int64_t first = block * from.block_items;
    data = std::make_shared<Block>(first, bytes / from.item_bytes, bytes);
    from.read(first, data->items(), data->data());
  } catch (...) {
    lock.lock();
    blocks_.erase(id);
    resident_bytes_ -= bytes;
    loaded_.notify_all();
    throw;
  }
  lock.lock();
  Entry& entry = blocks_.at(id);
  entry.data = std::move(data);
  lru_.push_front(id);
  entry.recency = lru_.begin();
  loaded_.notify_all();
  return entry.data;
}

void BlockCache::prefetch(std::span<const ItemRange> ranges) {
  if (!prefetcher_.joinable()) return;
  std::vector<int64_t> wanted;
  std::unordered_set<int64_t> seen;
  const int64_t budget = capacity_bytes_ / 2;
  int64_t wanted_bytes = 0;
  // The first block that does not fit in the budget ends the request.
  const auto want = [&](int source, int64_t block, int64_t bytes) {
    if (!seen.insert(key(source, block)).second) return true;
    if (!wanted.empty() && wanted_bytes + bytes > budget) return false;
    wanted.push_back(key(source, block));
    wanted_bytes += bytes;
    return true;
  };
  for (const ItemRange& range : ranges) {
    const BlockSource& from = source(range.source);
    if (range.count <= 0 || range.first < 0 || range.first >= from.items) continue;
    const int64_t last = std::min(range.first + range.count, from.items) - 1;
    bool more = true;
    for (int64_t block = range.first / from.block_items; more && block <= last / from.block_items; ++block)
      more = want(range.source, block, from.block_bytes(block));
    if (!more) break;
  }
  {
    std::lock_guard lock(mutex_);
    pending_.assign(wanted.begin(), wanted.end());
  }
  wanted_.notify_all();
}

void BlockCache::prefetch_loop() {
  const auto sources = static_cast<int64_t>(sources_.size());
  std::unique_lock lock(mutex_);
  while (true) {
    wanted_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
    if (stopping_) return;
    const int64_t id = pending_.front();
    pending_.pop_front();
    lock.unlock();
    try {
      load(static_cast<int>(id % sources), id / sources, /*demand=*/false);
    } catch (...) {
      // Left to the demand read of the same block, which raises the error where it is used.
    }
    lock.lock();
  }
}

BlockCacheStats BlockCache::stats() const {
  std::lock_guard lock(mutex_);
  BlockCacheStats stats = stats_;
  stats.resident_bytes = resident_bytes_;
  return stats;
}

void for_each_block(const BlockSource& source, const std::function<void(const Block&)>& visit) {
  Block block(0, source.block_items, source.block_bytes(0));
  for (int64_t index = 0; index < source.block_count(); ++index) {
    block.first_item_ = index * source.block_items;
    block.bytes_ = source.block_bytes(index);
    block.items_ = block.bytes_ / source.item_bytes;
    source.read(block.first_item_, block.items_, block.data());
    visit(block);
  }
}

int64_t pick_block_items(int64_t requested, int64_t chunk_items, int64_t item_bytes, int64_t items,
                         int64_t cache_bytes, const BlockSizing& sizing) {
  MIRRORED_CHECK(item_bytes > 0 && items > 0 && cache_bytes >= 0, items, " items of ", item_bytes,
                 " bytes behind a cache of ", cache_bytes);
  int64_t block = requested;
  if (block <= 0) {
    const bool bounded = cache_bytes > 0;
    if (chunk_items > 0 && (!bounded || 2 * chunk_items * item_bytes <= cache_bytes)) {
      block = chunk_items;
    } else if (!bounded) {
      block = std::max<int64_t>(1, sizing.default_bytes / item_bytes);
    } else {
      block = std::max(sizing.min_items,
                       std::min(sizing.default_bytes, cache_bytes / sizing.blocks_per_cache) / item_bytes);
    }
  }
  return std::min(block, items);
}

}  // namespace mirrored::data
