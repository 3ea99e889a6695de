// The one block cache under the image and token datasets: least-recently-used eviction,
// the byte bound (blocks being read included) from several threads over several sources,
// a block larger than the budget, and a failing read of a file surfacing as an InputError
// that names the file, with the cache left usable.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include "../../src/data/hdf5_rows.h"
#include "error_matchers.h"
#include "mirrored/core/error.h"
#include "mirrored/core/rng.h"
#include "mirrored/data/block_cache.h"
#include "mirrored/io/hdf5.h"
#include "temp_dir.h"

namespace mirrored::data {
namespace {

using mirrored::testing::expect_mentions;
using mirrored::testing::message_of;
using mirrored::testing::TempDir;

// Byte `k` of item `i` of source `s`: every byte of every source tells where it came from.
uint8_t pattern(int s, int64_t i, int64_t k) { return static_cast<uint8_t>(s * 101 + i * 7 + k * 3); }

// A source held in memory that logs the first item of every read, in order.
struct LoggedSource {
  std::mutex mutex;
  std::vector<int64_t> reads;

  BlockSource make(int s, int64_t items, int64_t item_bytes, int64_t block_items) {
    BlockSource source{.items = items, .item_bytes = item_bytes, .block_items = block_items, .read = {}};
    source.read = [this, s, item_bytes](int64_t first, int64_t count, std::byte* out) {
      {
        std::lock_guard lock(mutex);
        reads.push_back(first);
      }
      for (int64_t i = 0; i < count; ++i)
        for (int64_t k = 0; k < item_bytes; ++k) out[i * item_bytes + k] = std::byte{pattern(s, first + i, k)};
    };
    return source;
  }
};

TEST(BlockCache, EvictsTheLeastRecentlyUsedBlock) {
  LoggedSource log;
  std::vector<BlockSource> sources;
  sources.push_back(log.make(0, 100, 1, 10));  // 10 blocks of 10 bytes
  BlockCache cache(std::move(sources), {.capacity_bytes = 30, .prefetch = false});
  for (const int64_t item : {0, 10, 20}) cache.block_of(0, item);  // blocks 0, 1, 2: 3 misses
  cache.block_of(0, 5);                                            // block 0 is used again: a hit
  cache.block_of(0, 35);  // block 3 evicts block 1, the least recently used
  EXPECT_EQ(log.reads, (std::vector<int64_t>{0, 10, 20, 30}));
  cache.block_of(0, 9);   // blocks 0 and 2 are resident
  cache.block_of(0, 29);
  EXPECT_EQ(log.reads.size(), 4u);
  cache.block_of(0, 19);  // block 1 was evicted: read again, evicting block 3 (0 and 2 were used since)
  cache.block_of(0, 0);
  cache.block_of(0, 20);
  EXPECT_EQ(log.reads, (std::vector<int64_t>{0, 10, 20, 30, 10}));
  cache.block_of(0, 30);
  EXPECT_EQ(log.reads, (std::vector<int64_t>{0, 10, 20, 30, 10, 30}));
  const BlockCacheStats stats = cache.stats();
  EXPECT_EQ(stats.misses, 6);
  EXPECT_EQ(stats.hits, 5);
  EXPECT_EQ(stats.resident_bytes, 30);
  EXPECT_EQ(stats.peak_resident_bytes, 30);
  EXPECT_EQ(stats.capacity_bytes, 30);
}

// Threads read random items of three sources of unlike sizes (short last blocks) through
// one cache smaller than the data: every byte is right and the bound always holds.
TEST(BlockCache, TheByteBoundHoldsForSeveralSourcesAndThreads) {
  LoggedSource log;
  // items, bytes per item, items per block
  const std::vector<std::array<int64_t, 3>> shapes = {{1003, 3, 64}, {517, 8, 20}, {64, 100, 5}};
  std::vector<BlockSource> sources;
  for (size_t s = 0; s < shapes.size(); ++s)
    sources.push_back(log.make(static_cast<int>(s), shapes[s][0], shapes[s][1], shapes[s][2]));
  constexpr int64_t kCapacity = 2000;  // bytes: the data is 3009 + 4136 + 6400
  BlockCache cache(std::move(sources), {.capacity_bytes = kCapacity, .prefetch = true});
  std::atomic<int64_t> wrong{0};
  std::atomic<int64_t> largest_seen{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Rng rng(40 + static_cast<uint64_t>(t));
      for (int n = 0; n < 3000; ++n) {
        const int s = static_cast<int>(rng.below(shapes.size()));
        const std::array<int64_t, 3>& shape = shapes[static_cast<size_t>(s)];
        const auto item = static_cast<int64_t>(rng.below(static_cast<uint64_t>(shape[0])));
        const std::shared_ptr<const Block> block = cache.block_of(s, item);
        const int64_t bytes = shape[1];
        const std::byte* at = block->data() + (item - block->first_item()) * bytes;
        for (int64_t k = 0; k < bytes; ++k) wrong += at[k] != std::byte{pattern(s, item, k)};
        if (t == 0 && n % 10 == 0) {
          const std::vector<ItemRange> next = {{.source = s, .first = item + 50, .count = 80}};
          cache.prefetch(next);
        }
        int64_t seen = largest_seen.load();
        const int64_t now = cache.stats().resident_bytes;
        while (now > seen && !largest_seen.compare_exchange_weak(seen, now)) {
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
  const BlockCacheStats stats = cache.stats();
  EXPECT_EQ(stats.capacity_bytes, kCapacity);
  EXPECT_LE(stats.peak_resident_bytes, kCapacity);
  EXPECT_LE(largest_seen.load(), kCapacity);
  EXPECT_GT(stats.misses + stats.prefetch_loads, (3009 + 4136 + 6400) / 500) << "the cache must have evicted";
}

TEST(BlockCache, ABlockLargerThanTheBudgetRaisesTheCapacityToTwoBlocks) {
  LoggedSource log;
  std::vector<BlockSource> sources;
  sources.push_back(log.make(0, 10, 100, 3));  // blocks of 300 bytes (the last 100)
  sources.push_back(log.make(1, 4, 10, 4));    // one block of 40
  BlockCache cache(std::move(sources), {.capacity_bytes = 100, .prefetch = false});
  EXPECT_EQ(cache.capacity_bytes(), 600);
  for (int repeat = 0; repeat < 3; ++repeat)
    for (const int64_t item : {0, 9, 4, 7}) {
      const std::shared_ptr<const Block> block = cache.block_of(0, item);
      EXPECT_EQ(block->data()[(item - block->first_item()) * 100], std::byte{pattern(0, item, 0)});
      cache.block_of(1, 3);
    }
  EXPECT_LE(cache.stats().peak_resident_bytes, 600);

  // No bound: every block may stay, and nothing is read twice.
  LoggedSource unbounded_log;
  std::vector<BlockSource> whole;
  whole.push_back(unbounded_log.make(0, 10, 100, 3));
  BlockCache unbounded(std::move(whole), {.capacity_bytes = 0, .prefetch = false});
  EXPECT_EQ(unbounded.capacity_bytes(), 1000);
  for (int repeat = 0; repeat < 2; ++repeat)
    for (int64_t item = 0; item < 10; ++item) unbounded.block_of(0, item);
  EXPECT_EQ(unbounded_log.reads, (std::vector<int64_t>{0, 3, 6, 9}));
}

TEST(BlockCache, ForEachBlockVisitsEveryBlockOnceInOrder) {
  LoggedSource log;
  const BlockSource source = log.make(2, 23, 4, 5);
  std::vector<std::pair<int64_t, int64_t>> seen;
  int64_t wrong = 0;
  for_each_block(source, [&](const Block& block) {
    seen.emplace_back(block.first_item(), block.items());
    EXPECT_EQ(block.bytes(), block.items() * 4);
    for (int64_t i = 0; i < block.items(); ++i)
      for (int64_t k = 0; k < 4; ++k)
        wrong += block.data()[i * 4 + k] != std::byte{pattern(2, block.first_item() + i, k)};
  });
  EXPECT_EQ(seen, (std::vector<std::pair<int64_t, int64_t>>{{0, 5}, {5, 5}, {10, 5}, {15, 5}, {20, 3}}));
  EXPECT_EQ(wrong, 0);
}

TEST(BlockCache, PrefetchAsksForAtMostHalfTheCapacity) {
  LoggedSource log;
  std::vector<BlockSource> sources;
  sources.push_back(log.make(0, 100, 1, 10));
  sources.push_back(log.make(1, 100, 1, 10));
  BlockCache cache(std::move(sources), {.capacity_bytes = 60, .prefetch = true});
  // Six blocks announced (one twice); half the capacity holds three.
  const std::vector<ItemRange> ranges = {{.source = 1, .first = 0, .count = 15},
                                         {.source = 0, .first = 5, .count = 1},
                                         {.source = 1, .first = 12, .count = 1},
                                         {.source = 0, .first = 90, .count = 20}};
  cache.prefetch(ranges);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (cache.stats().prefetch_loads < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // time for a fourth, which must not come
  EXPECT_EQ(cache.stats().prefetch_loads, 3);
  for (const auto& [s, item] : std::vector<std::pair<int, int64_t>>{{1, 0}, {1, 10}, {0, 0}}) cache.block_of(s, item);
  EXPECT_EQ(cache.stats().hits, 3);
  EXPECT_EQ(cache.stats().misses, 0);
  cache.block_of(0, 95);
  EXPECT_EQ(cache.stats().misses, 1);
}

// /rows holds two compressed chunks, rows [0, 65536) and [65536, 100000); the file is cut
// short inside the second after it was opened (a copy still being written, a full disk).
TEST(BlockCache, AFailedReadIsAnInputErrorNamingTheFile) {
  TempDir dir;
  const std::string path = dir.file("rows.h5");
  constexpr int64_t kRows = 100000, kWidth = 16;
  std::vector<uint8_t> values(static_cast<size_t>(kRows * kWidth));
  Rng rng(3);
  for (uint8_t& v : values) v = static_cast<uint8_t>(rng.below(256));
  haddr_t second_chunk = 0;
  {
    io::H5File file(path, io::H5File::Access::kTruncate);
    file.write_u8("/rows", {kRows, kWidth}, values.data(), /*compress=*/true);
    file.flush();
    const io::H5Handle set(H5Dopen2(file.id(), "/rows", H5P_DEFAULT), H5Dclose);
    const hsize_t at[2] = {65536, 0};
    unsigned filters = 0;
    hsize_t stored = 0;
    ASSERT_GE(H5Dget_chunk_info_by_coord(set.get(), at, &filters, &second_chunk, &stored), 0);
  }
  auto rows = std::make_shared<const detail::Hdf5Rows>(path, "/rows", "rows");
  ASSERT_EQ(rows->chunk_rows(), 65536);
  std::vector<BlockSource> sources;
  sources.push_back(detail::row_blocks(rows, H5T_NATIVE_UINT8, 1000));
  BlockCache cache(std::move(sources), {.capacity_bytes = 64000, .prefetch = true});
  std::filesystem::resize_file(path, second_chunk + 100);

  const std::vector<ItemRange> doomed = {{.source = 0, .first = 66000, .count = 1}};
  cache.prefetch(doomed);  // the background read fails quietly; the demand read below says why
  // Once the background read has begun, a demand read of the block waits for it to end.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (cache.stats().prefetch_loads < 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(cache.stats().prefetch_loads, 1);
  for (int attempt = 0; attempt < 2; ++attempt) {
    expect_mentions(message_of<InputError>([&] { cache.block_of(0, 66500); }),
                    {path, "/rows", "H5Dread", "rows [66000, 67000)", "damaged or truncated"});
  }
  const std::shared_ptr<const Block> intact = cache.block_of(0, 2500);
  EXPECT_EQ(std::memcmp(intact->data(), values.data() + 2000 * kWidth, static_cast<size_t>(1000 * kWidth)), 0);
  EXPECT_EQ(cache.stats().resident_bytes, 1000 * kWidth) << "a failed read must give its reservation back";
}

TEST(BlockCache, PickBlockItems) {
  const BlockSizing images{.default_bytes = 64 << 10, .blocks_per_cache = 16, .min_items = 1};
  const BlockSizing tokens{.default_bytes = 128 << 10, .blocks_per_cache = 8, .min_items = 1024};
  EXPECT_EQ(pick_block_items(7, 100, 1, 50, 1000, images), 7);           // as requested
  EXPECT_EQ(pick_block_items(70, 100, 1, 50, 1000, images), 50);         // at most every item
  EXPECT_EQ(pick_block_items(0, 1337, 784, 60000, 8 << 20, images), 1337);  // two chunks fit
  EXPECT_EQ(pick_block_items(0, 1337, 784, 60000, 1 << 20, images), 83);    // they do not: 64 KiB
  EXPECT_EQ(pick_block_items(0, 0, 784, 60000, 4000, images), 1);           // 1/16 of 4000 bytes: one sample
  EXPECT_EQ(pick_block_items(0, 0, 2, 1 << 30, 0, tokens), 65536);          // no bound
  EXPECT_EQ(pick_block_items(0, 0, 2, 1 << 30, 1 << 20, tokens), 65536);    // 1/8 of 1 MiB
  EXPECT_EQ(pick_block_items(0, 0, 2, 1 << 30, 64 << 10, tokens), 4096);
  EXPECT_EQ(pick_block_items(0, 0, 2, 1 << 30, 1000, tokens), 1024);        // never below 1 Ki
  EXPECT_EQ(pick_block_items(0, 1 << 20, 2, 1 << 30, 0, tokens), 1 << 20);  // no bound: the chunk
}

}  // namespace
}  // namespace mirrored::data
