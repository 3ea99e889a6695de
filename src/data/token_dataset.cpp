#include "mirrored/data/token_dataset.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "checked_token_file.h"
#include "hdf5_rows.h"

namespace mirrored::data {
namespace {

// 64 Ki tokens per block when the file's chunks do not serve, at least 1 Ki, and at least
// 8 blocks in a bounded cache.
BlockSizing token_blocks(int token_bytes) {
  return {.default_bytes = (int64_t{64} << 10) * token_bytes, .blocks_per_cache = 8, .min_items = 1024};
}

}  // namespace

TokenDataset::TokenDataset(const std::string& path, TokenCacheOptions options) {
  // Read through the very open file that was validated.
  std::shared_ptr<const detail::Hdf5Rows> rows = detail::open_checked_token_file(path, info_);
  MIRRORED_CHECK(options.cache_bytes >= 0, "cache_bytes ", options.cache_bytes);
  block_tokens_ = pick_block_items(options.block_tokens, info_.chunk_tokens, info_.token_bytes, info_.num_tokens,
                                   options.cache_bytes, token_blocks(info_.token_bytes));
  // The prefetch thread calls HDF5 while the caller may too (reading, or writing a
  // checkpoint): only a thread-safe HDF5 build (Debian's is) serialises that.
  hdf5_thread_safe_ = detail::hdf5_thread_safe();
  std::vector<BlockSource> sources;
  sources.push_back(detail::row_blocks(std::move(rows), detail::native_unsigned(info_.token_bytes), block_tokens_));
  cache_ = std::make_unique<BlockCache>(
      std::move(sources),
      BlockCacheOptions{.capacity_bytes = options.cache_bytes, .prefetch = options.prefetch && hdf5_thread_safe_});
}

TokenDataset::~TokenDataset() = default;

void TokenDataset::read(int64_t offset, int64_t count, int32_t* out) {
  MIRRORED_CHECK(offset >= 0 && count >= 0 && offset + count <= info_.num_tokens, "tokens [", offset, ", ",
                 offset + count, ") outside '", info_.path, "' of ", info_.num_tokens, " tokens");
  int64_t position = offset;
  const int64_t end = offset + count;
  while (position < end) {
    const std::shared_ptr<const Block> block = cache_->block_of(0, position);
    const int64_t first = position - block->first_item();
    const int64_t n = std::min(end - position, block->items() - first);
    int32_t* dst = out + (position - offset);
    if (info_.token_bytes == 1) {
      const uint8_t* src = block->as<uint8_t>() + first;
      for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
    } else {
      const uint16_t* src = block->as<uint16_t>() + first;
      for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
    }
    position += n;
  }
}

void TokenDataset::prefetch(std::span<const int64_t> offsets, int64_t count) {
  std::vector<ItemRange> ranges;
  ranges.reserve(offsets.size());
  for (const int64_t offset : offsets) ranges.push_back({.source = 0, .first = offset, .count = count});
  cache_->prefetch(ranges);
}

TokenCacheStats TokenDataset::stats() const {
  TokenCacheStats stats;
  static_cast<BlockCacheStats&>(stats) = cache_->stats();
  stats.block_tokens = block_tokens_;
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
