// The windowed token reader: any window equals the file's bytes, the cache stays within
// its bound on a file larger than it, and a bounded cache gives the same batches as an
// unbounded one, with or without the prefetch thread, from several threads at once.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "mirrored/core/error.h"
#include "mirrored/core/rng.h"
#include "mirrored/data/token_dataset.h"
#include "mirrored/data/token_file.h"
#include "mirrored/distribute/distributed_token_dataset.h"
#include "mirrored/io/hdf5.h"
#include "temp_dir.h"

namespace mirrored::data {
namespace {

using mirrored::testing::TempDir;

std::vector<uint8_t> random_bytes(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint8_t> bytes(static_cast<size_t>(n));
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng.below(256));
  return bytes;
}

std::string write_bytes(const TempDir& dir, const std::string& name, const std::vector<uint8_t>& bytes) {
  write_token_file(dir.file(name), bytes, {});
  return dir.file(name);
}

TEST(TokenReader, RandomWindowsEqualTheFileBytes) {
  TempDir dir;
  const std::vector<uint8_t> bytes = random_bytes(300001, 5);
  TokenDataset dataset(write_bytes(dir, "t.h5", bytes), {.cache_bytes = 64 << 10, .block_tokens = 4096, .prefetch = true});
  EXPECT_EQ(dataset.size(), 300001);
  Rng rng(11);
  std::vector<int32_t> window;
  for (int i = 0; i < 2000; ++i) {
    const auto count = static_cast<int64_t>(1 + rng.below(20000));
    const auto offset = static_cast<int64_t>(rng.below(static_cast<uint64_t>(dataset.size() - count + 1)));
    window.assign(static_cast<size_t>(count), -1);
    dataset.read(offset, count, window.data());
    for (int64_t k = 0; k < count; ++k) {
      ASSERT_EQ(window[static_cast<size_t>(k)], bytes[static_cast<size_t>(offset + k)]) << "offset " << offset << " + " << k;
    }
  }
  // The last token, and the whole file in one read.
  int32_t last = -1;
  dataset.read(dataset.size() - 1, 1, &last);
  EXPECT_EQ(last, bytes.back());
  std::vector<int32_t> all(bytes.size());
  dataset.read(0, dataset.size(), all.data());
  EXPECT_TRUE(std::equal(all.begin(), all.end(), bytes.begin()));
  EXPECT_LE(dataset.stats().peak_resident_bytes, 64 << 10);
}

TEST(TokenReader, ReadingOutsideTheFileIsAnError) {
  TempDir dir;
  TokenDataset dataset(write_bytes(dir, "t.h5", random_bytes(100, 1)), {.cache_bytes = 0, .block_tokens = 0, .prefetch = false});
  std::vector<int32_t> out(10);
  EXPECT_THROW(dataset.read(95, 10, out.data()), Error);
  EXPECT_THROW(dataset.read(-1, 2, out.data()), Error);
}

// Every batch of several epochs through a 1 MiB cache over a 3 MiB file equals the batches
// read with no bound; the bounded cache never held more than 1 MiB and had to evict.
TEST(TokenReader, BoundedCacheGivesTheSameBatchesAsUnbounded) {
  TempDir dir;
  const std::string path = write_bytes(dir, "big.h5", random_bytes(int64_t{3} << 20, 8));
  const std::shared_ptr<TokenDataset> bounded = load_token_dataset(path, 1);
  const std::shared_ptr<TokenDataset> unbounded = load_token_dataset(path, 0);
  const distribute::TokenDatasetOptions options{.global_batch = 16, .context = 256, .seed = 3};
  distribute::DistributedTokenDataset a(bounded, options, IndexRange{0, 16});
  distribute::DistributedTokenDataset b(unbounded, options, IndexRange{0, 16});
  const int64_t steps = 3 * a.steps_per_epoch();
  ASSERT_EQ(a.steps_per_epoch(), 768);
  for (int64_t step = 0; step < steps; ++step) {
    const distribute::Batch& x = a.batch(step);
    const distribute::Batch& y = b.batch(step);
    ASSERT_EQ(x.inputs.shape(), (Shape{16, 256}));
    ASSERT_EQ(0, std::memcmp(x.inputs.raw(), y.inputs.raw(), x.inputs.bytes())) << "step " << step;
    ASSERT_EQ(0, std::memcmp(x.targets.raw(), y.targets.raw(), x.targets.bytes())) << "step " << step;
  }
  const TokenCacheStats stats = bounded->stats();
  EXPECT_EQ(stats.capacity_bytes, 1 << 20);
  EXPECT_LE(stats.peak_resident_bytes, 1 << 20);
  EXPECT_LE(stats.resident_bytes, 1 << 20);
  EXPECT_GT(stats.misses + stats.prefetch_loads, (int64_t{3} << 20) / (stats.block_tokens))
      << "the bounded cache must have reloaded evicted blocks";
  EXPECT_EQ(unbounded->stats().capacity_bytes, int64_t{3} << 20);
}

TEST(TokenReader, PrefetchLoadsAnnouncedBlocksInTheBackground) {
  hbool_t thread_safe = 0;
  H5is_library_threadsafe(&thread_safe);
  if (!thread_safe) GTEST_SKIP() << "this HDF5 build is not thread-safe, so the reader runs no prefetch thread";
  TempDir dir;
  TokenDataset dataset(write_bytes(dir, "t.h5", random_bytes(1 << 20, 2)),
                       {.cache_bytes = 512 << 10, .block_tokens = 8192, .prefetch = true});
  const std::vector<int64_t> offsets = {0, 100000, 500000};
  dataset.prefetch(offsets, 100);  // three blocks
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (dataset.stats().prefetch_loads < 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(dataset.stats().prefetch_loads, 3);
  std::vector<int32_t> window(100);
  for (const int64_t offset : offsets) dataset.read(offset, 100, window.data());
  EXPECT_EQ(dataset.stats().hits, 3);
  EXPECT_EQ(dataset.stats().misses, 0);
}

// Readers on several threads share one small cache (and the prefetch thread): every
// window is still right. Under ThreadSanitizer this is the data-race check.
TEST(TokenReader, ConcurrentReadersSeeTheFileBytes) {
  TempDir dir;
  const std::vector<uint8_t> bytes = random_bytes(1 << 20, 4);
  TokenDataset dataset(write_bytes(dir, "t.h5", bytes), {.cache_bytes = 96 << 10, .block_tokens = 4096, .prefetch = true});
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Rng rng(100 + static_cast<uint64_t>(t));
      std::vector<int32_t> window(3000);
      for (int i = 0; i < 400; ++i) {
        const auto offset = static_cast<int64_t>(rng.below(bytes.size() - window.size()));
        dataset.read(offset, static_cast<int64_t>(window.size()), window.data());
        if (t == 0) dataset.prefetch(std::vector<int64_t>{offset + 50000, offset + 90000}, 3000);
        for (size_t k = 0; k < window.size(); ++k) wrong[t] += window[k] != bytes[static_cast<size_t>(offset) + k];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(wrong[t], 0) << "thread " << t;
  EXPECT_LE(dataset.stats().peak_resident_bytes, 96 << 10);
}

}  // namespace
}  // namespace mirrored::data
