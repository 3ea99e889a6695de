#include "mirrored/data/token_dataset.h"

#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "token_slab.h"

namespace mirrored::data {
namespace {

constexpr int64_t kDefaultBlockTokens = int64_t{64} << 10;
constexpr int64_t kMinBlockTokens = 1024;
constexpr int64_t kTokenBlocksPerCache = 8;  // a default block is at most 1/8 of the cache

int64_t pick_block_tokens(const TokenFileInfo& info, const TokenCacheOptions& options) {
  int64_t tokens = options.block_tokens;
  if (tokens <= 0) {
    const int64_t width = info.token_bytes;
    const bool bounded = options.cache_bytes > 0;
    if (info.chunk_tokens > 0 && (!bounded || 2 * info.chunk_tokens * width <= options.cache_bytes)) {
      tokens = info.chunk_tokens;
    } else {
      tokens = kDefaultBlockTokens;
      if (bounded) tokens = std::max(kMinBlockTokens, std::min(tokens, options.cache_bytes / (kTokenBlocksPerCache * width)));
    }
  }
  return std::min(tokens, info.num_tokens);
}

}  // namespace

TokenDataset::TokenDataset(const std::string& path, TokenCacheOptions options) {
  // Validated through the very descriptor it is read through.
  reader_ = detail::open_checked_token_file(path, info_);
  MIRRORED_CHECK(options.cache_bytes >= 0, "cache_bytes ", options.cache_bytes);
  block_tokens_ = pick_block_tokens(info_, options);
  const int64_t block_size = block_tokens_ * info_.token_bytes;
  capacity_bytes_ = options.cache_bytes == 0 ? block_count() * block_size
                                             : std::max(options.cache_bytes, 2 * block_size);
  stats_.block_tokens = block_tokens_;
  stats_.capacity_bytes = capacity_bytes_;
  // The prefetch thread calls HDF5 while the caller may too (reading, or writing a
  // checkpoint): only a thread-safe HDF5 build (Debian's is) serialises that.
  hbool_t thread_safe = 0;
  if (H5is_library_threadsafe(&thread_safe) < 0) thread_safe = 0;
  hdf5_thread_safe_ = thread_safe != 0;
  if (options.prefetch && thread_safe) prefetcher_ = std::thread([this] { prefetch_loop(); });
}

TokenDataset::~TokenDataset() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wanted_.notify_all();
  if (prefetcher_.joinable()) prefetcher_.join();
}

int64_t TokenDataset::block_bytes(int64_t index) const {
  return std::min(block_tokens_, info_.num_tokens - index * block_tokens_) * info_.token_bytes;
}

std::shared_ptr<const TokenDataset::Block> TokenDataset::block(int64_t index, bool demand) {
  const int64_t bytes = block_bytes(index);
  std::unique_lock lock(mutex_);
  bool waited = false;
  while (true) {
    const auto found = blocks_.find(index);
    if (found != blocks_.end()) {
      Entry& entry = found->second;
      if (entry.data) {
        lru_.splice(lru_.begin(), lru_, entry.recency);
        if (demand) ++stats_.hits;
        return entry.data;
      }
      if (!demand) return nullptr;  // another thread is loading it
      waited = true;
      loaded_.wait(lock);
      continue;
    }
    if (resident_bytes_ + bytes <= capacity_bytes_) break;
    if (!lru_.empty()) {
      const int64_t victim = lru_.back();
      lru_.pop_back();
      resident_bytes_ -= block_bytes(victim);
      blocks_.erase(victim);
      continue;
    }
    loaded_.wait(lock);  // everything resident is still loading: wait for one to finish
  }
  // Not resident (a block another thread was loading may have failed or been evicted).
  blocks_.emplace(index, Entry{});
  resident_bytes_ += bytes;
  stats_.peak_resident_bytes = std::max(stats_.peak_resident_bytes, resident_bytes_);
  if (!demand) {
    ++stats_.prefetch_loads;
  } else if (waited) {
    ++stats_.hits;
  } else {
    ++stats_.misses;
  }
  lock.unlock();

  auto data = std::make_shared<Block>(static_cast<size_t>(bytes));
  try {
    reader_->read(index * block_tokens_, bytes / info_.token_bytes, data->data());
  } catch (...) {
    lock.lock();
    blocks_.erase(index);
    resident_bytes_ -= bytes;
    loaded_.notify_all();
    throw;
  }
  lock.lock();
  Entry& entry = blocks_.at(index);
  entry.data = std::move(data);
  lru_.push_front(index);
  entry.recency = lru_.begin();
  loaded_.notify_all();
  return entry.data;
}

void TokenDataset::read(int64_t offset, int64_t count, int32_t* out) {
  MIRRORED_CHECK(offset >= 0 && count >= 0 && offset + count <= info_.num_tokens, "tokens [", offset, ", ",
                 offset + count, ") outside '", info_.path, "' of ", info_.num_tokens, " tokens");
  int64_t position = offset;
  const int64_t end = offset + count;
  while (position < end) {
    const int64_t index = position / block_tokens_;
    const std::shared_ptr<const Block> data = block(index, /*demand=*/true);
    const int64_t first = position - index * block_tokens_;
    const int64_t n = std::min(end - position, static_cast<int64_t>(data->size()) / info_.token_bytes - first);
    int32_t* dst = out + (position - offset);
    if (info_.token_bytes == 1) {
      const uint8_t* src = data->data() + first;
      for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
    } else {
      for (int64_t i = 0; i < n; ++i) {
        uint16_t token = 0;
        std::memcpy(&token, data->data() + 2 * (first + i), sizeof(token));
        dst[i] = token;
      }
    }
    position += n;
  }
}

void TokenDataset::prefetch(std::span<const int64_t> offsets, int64_t count) {
  if (!prefetcher_.joinable() || count <= 0) return;
  const auto budget = static_cast<size_t>(std::max<int64_t>(1, capacity_bytes_ / (block_tokens_ * info_.token_bytes) / 2));
  std::vector<int64_t> wanted;
  std::unordered_set<int64_t> seen;
  for (const int64_t offset : offsets) {
    if (offset < 0 || offset >= info_.num_tokens) continue;
    const int64_t last = std::min(offset + count, info_.num_tokens) - 1;
    for (int64_t index = offset / block_tokens_; index <= last / block_tokens_ && wanted.size() < budget; ++index) {
      if (seen.insert(index).second) wanted.push_back(index);
    }
  }
  {
    std::lock_guard lock(mutex_);
    pending_.assign(wanted.begin(), wanted.end());
  }
  wanted_.notify_all();
}

void TokenDataset::prefetch_loop() {
  std::unique_lock lock(mutex_);
  while (true) {
    wanted_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
    if (stopping_) return;
    const int64_t index = pending_.front();
    pending_.pop_front();
    lock.unlock();
    try {
      block(index, /*demand=*/false);
    } catch (...) {
      // Left to the demand read of the same block, which raises the error where it is used.
    }
    lock.lock();
  }
}

TokenCacheStats TokenDataset::stats() const {
  std::lock_guard lock(mutex_);
  TokenCacheStats stats = stats_;
  stats.resident_bytes = resident_bytes_;
  return stats;
}

std::shared_ptr<TokenDataset> load_token_dataset(const std::string& path, int64_t cache_mb) {
  if (cache_mb < 0) {
    throw InputError(str_cat("data.cache_mb = ", cache_mb, ", expected 0 (no bound) or a size in MiB"),
                     ExitCode::kUsage);
  }
  TokenCacheOptions options;
  options.cache_bytes = cache_mb << 20;
  return std::make_shared<TokenDataset>(path, options);
}

void assemble_token_batch(TokenDataset& dataset, std::span<const int64_t> offsets, int64_t context, Tensor& inputs,
                          Tensor& targets) {
  const auto n = static_cast<int64_t>(offsets.size());
  MIRRORED_CHECK(context >= 1, "context ", context);
  ensure_shape(inputs, {n, context}, DType::kI32);
  ensure_shape(targets, {n, context}, DType::kI32);
  int32_t* input_rows = inputs.data<int32_t>();
  int32_t* target_rows = targets.data<int32_t>();
  for (int64_t row = 0; row < n; ++row) {
    const int64_t offset = offsets[static_cast<size_t>(row)];
    int32_t* input = input_rows + row * context;
    int32_t* target = target_rows + row * context;
    dataset.read(offset, context, input);
    // The targets are the inputs shifted by one: only the last token is new.
    std::memcpy(target, input + 1, static_cast<size_t>(context - 1) * sizeof(int32_t));
    dataset.read(offset + context, 1, target + context - 1);
  }
}

}  // namespace mirrored::data
