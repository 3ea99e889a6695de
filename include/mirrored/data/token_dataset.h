#pragma once
// A token file read in windows, for language-model training on data of any size. Reads go
// through the bounded block cache (block_cache.h): fixed-size blocks of the file, each one
// HDF5 hyperslab read; a background thread loads the blocks of windows announced with
// prefetch() while the caller works on the current ones. The cache never holds more than
// its capacity (blocks being loaded included), so memory stays bounded however large the
// file is. Every public member is safe to call from several threads when the HDF5 library
// is built thread-safe (Debian's is); with one that is not, there is no prefetch thread and
// the caller must read from one thread at a time. Several token files (shards, named as
// shard_list.h says) are read as one: their tokens concatenated in order, one cache source
// per shard, and a window may span two shards.
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <string>
#include <vector>

#include "mirrored/core/tensor.h"
#include "mirrored/data/block_cache.h"
#include "mirrored/data/token_file.h"

namespace mirrored::data {

struct TokenCacheOptions {
  // Bytes of file data the cache may hold; 0 means no bound (the whole file may become
  // resident). The effective capacity is at least two blocks.
  int64_t cache_bytes = int64_t{256} << 20;
  // Tokens per block; 0 picks one: the file's HDF5 chunk when it is chunked (so a block
  // inflates exactly one chunk), else 64 Ki tokens, shrunk so the cache holds 8 blocks.
  int64_t block_tokens = 0;
  bool prefetch = true;  // false: no background thread, prefetch() does nothing
};

struct TokenCacheStats : BlockCacheStats {
  int64_t block_tokens = 0;
};

class TokenDataset {
 public:
  // Opens and validates the file, or each shard `path` names (open_token_file: every token
  // within the vocabulary). Shards must agree on the token type, the vocabulary and the
  // tokenizer (model and sha256); an InputError names the shard and the field otherwise.
  // info() then describes the set: path is `path`, num_tokens the sum.
  TokenDataset(const std::string& path, TokenCacheOptions options = {});
  ~TokenDataset();
  TokenDataset(const TokenDataset&) = delete;
  TokenDataset& operator=(const TokenDataset&) = delete;

  const TokenFileInfo& info() const { return info_; }
  const std::string& source() const { return info_.path; }
  int64_t size() const { return info_.num_tokens; }
  int64_t vocab_size() const { return info_.vocab_size; }

  // Copies tokens [offset, offset + count) into `out`.
  void read(int64_t offset, int64_t count, int32_t* out);

  // Asks the background thread to load the blocks covering [offset, offset + count) for
  // each offset, in that order, replacing any earlier request not yet served. Returns at
  // once. Only as many blocks as half the cache are requested, so a prefetch cannot evict
  // what it just loaded.
  void prefetch(std::span<const int64_t> offsets, int64_t count);

  TokenCacheStats stats() const;

  // Whether another thread may read while the caller's thread also calls HDF5 (a thread-safe
  // HDF5 build): a reader thread of the caller's own needs it too.
  bool reads_from_any_thread() const { return hdf5_thread_safe_; }

 private:
  // The shard holding token `offset`, and the offset within it.
  std::pair<int, int64_t> locate(int64_t offset) const;

  TokenFileInfo info_;
  std::vector<int64_t> starts_;  // the set's offset of each shard's first token
  int64_t block_tokens_ = 0;
  bool hdf5_thread_safe_ = false;
  std::unique_ptr<BlockCache> cache_;
};

// The trainer's entry point: the file at `path` behind a cache of `cache_mb` MiB (0: no
// bound), with background prefetch.
std::shared_ptr<TokenDataset> load_token_dataset(const std::string& path, int64_t cache_mb);

// Fills `inputs` and `targets` [n, context] int32 for windows starting at `offsets`: row
// i holds tokens [offset, offset + context) and [offset + 1, offset + context + 1). Reuses
// the tensors' storage when large enough.
void assemble_token_batch(TokenDataset& dataset, std::span<const int64_t> offsets, int64_t context, Tensor& inputs,
                          Tensor& targets);

}  // namespace mirrored::data
