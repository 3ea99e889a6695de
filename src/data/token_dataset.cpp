#include "mirrored/data/token_dataset.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "checked_token_file.h"
#include "hdf5_rows.h"
#include "mirrored/core/strings.h"
#include "mirrored/data/shard_list.h"

namespace mirrored::data {
namespace {

// 64 Ki tokens per block when the file's chunks do not serve, at least 1 Ki, and at least
// 8 blocks in a bounded cache.
BlockSizing token_blocks(int token_bytes) {
  return {.default_bytes = (int64_t{64} << 10) * token_bytes, .blocks_per_cache = 8, .min_items = 1024};
}

// The shards of one set agree on everything the tokens mean; else an InputError naming the
// shard, the field, and what the first shard holds.
void check_agrees(const TokenFileInfo& first, const TokenFileInfo& shard) {
  const auto differs = [&](const char* field, const std::string& here, const std::string& there) {
    return InputError(str_cat("'", shard.path, "': ", field, " is ", here, " but the first shard '", first.path,
                              "' has ", there, "; the shards of one dataset must agree"));
  };
  if (shard.token_bytes != first.token_bytes)
    throw differs("/tokens type", shard.token_bytes == 1 ? "uint8" : "uint16", first.token_bytes == 1 ? "uint8" : "uint16");
  if (shard.vocab_size != first.vocab_size)
    throw differs("attribute vocab_size", str_cat(shard.vocab_size), str_cat(first.vocab_size));
  if (shard.tokenizer != first.tokenizer) throw differs("attribute tokenizer", shard.tokenizer, first.tokenizer);
  if (shard.tokenizer_model != first.tokenizer_model)
    throw differs("attribute tokenizer_model", shard.tokenizer_model, first.tokenizer_model);
  if (shard.tokenizer_sha256 != first.tokenizer_sha256)
    throw differs("attribute tokenizer_sha256", shard.tokenizer_sha256, first.tokenizer_sha256);
}

}  // namespace

TokenDataset::TokenDataset(const std::string& path, TokenCacheOptions options) {
  MIRRORED_CHECK(options.cache_bytes >= 0, "cache_bytes ", options.cache_bytes);
  // The prefetch thread calls HDF5 while the caller may too (reading, or writing a
  // checkpoint): only a thread-safe HDF5 build (Debian's is) serialises that.
  hdf5_thread_safe_ = detail::hdf5_thread_safe();
  std::vector<BlockSource> sources;
  for (const std::string& shard_path : expand_shards(path)) {
    // Read through the very open file that was validated.
    TokenFileInfo shard;
    std::shared_ptr<const detail::Hdf5Rows> rows = detail::open_checked_token_file(shard_path, shard);
    const int64_t block_tokens = pick_block_items(options.block_tokens, shard.chunk_tokens, shard.token_bytes,
                                                  shard.num_tokens, options.cache_bytes, token_blocks(shard.token_bytes));
    if (sources.empty()) {
      info_ = shard;
      info_.num_tokens = 0;
      block_tokens_ = block_tokens;
    } else {
      check_agrees(info_, shard);
    }
    starts_.push_back(info_.num_tokens);
    info_.num_tokens += shard.num_tokens;
    sources.push_back(detail::row_blocks(std::move(rows), detail::native_unsigned(info_.token_bytes), block_tokens));
  }
  if (sources.size() > 1) info_.path = path;
  cache_ = std::make_unique<BlockCache>(
      std::move(sources),
      BlockCacheOptions{.capacity_bytes = options.cache_bytes, .prefetch = options.prefetch && hdf5_thread_safe_});
}

TokenDataset::~TokenDataset() = default;

std::pair<int, int64_t> TokenDataset::locate(int64_t offset) const {
  const auto shard = static_cast<int>(std::upper_bound(starts_.begin(), starts_.end(), offset) - starts_.begin()) - 1;
  return {shard, offset - starts_[static_cast<size_t>(shard)]};
}

void TokenDataset::read(int64_t offset, int64_t count, int32_t* out) {
  MIRRORED_CHECK(offset >= 0 && count >= 0 && offset + count <= info_.num_tokens, "tokens [", offset, ", ",
                 offset + count, ") outside '", info_.path, "' of ", info_.num_tokens, " tokens");
  int64_t position = offset;
  const int64_t end = offset + count;
  while (position < end) {
    const auto [shard, local] = locate(position);
    const std::shared_ptr<const Block> block = cache_->block_of(shard, local);
    const int64_t first = local - block->first_item();
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
  for (const int64_t offset : offsets) {
    // A window that spans shards is announced as one range per shard.
    int64_t position = std::max<int64_t>(0, offset);
    const int64_t end = std::min(offset + count, info_.num_tokens);
    while (position < end) {
      const auto [shard, local] = locate(position);
      const int64_t n = std::min(end - position, cache_->source(shard).items - local);
      ranges.push_back({.source = shard, .first = local, .count = n});
      position += n;
    }
  }
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
