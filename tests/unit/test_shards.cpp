// One dataset stored in several files (shards): the files a list or a glob names, and the
// image and token sets read through them, which must give the bits of the same data in one
// file, in memory and through the block cache, and refuse shards that disagree.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "error_matchers.h"
#include "mirrored/core/error.h"
#include "mirrored/data/dataset.h"
#include "mirrored/data/hdf5_dataset.h"
#include "mirrored/data/image_cache.h"
#include "mirrored/data/sampler.h"
#include "mirrored/data/shard_list.h"
#include "mirrored/data/token_dataset.h"
#include "mirrored/data/token_file.h"
#include "temp_dir.h"

namespace mirrored::data {
namespace {

namespace fs = std::filesystem;
using mirrored::testing::expect_mentions;
using mirrored::testing::message_of;
using mirrored::testing::TempDir;

void touch(const std::string& path) { std::ofstream(path) << "x"; }

TEST(ShardList, APlainFileIsItself) {
  TempDir dir;
  const std::string odd = dir.file("a,b*.h5");  // commas and stars in a real name
  touch(odd);
  EXPECT_FALSE(names_shards(odd));
  EXPECT_EQ(expand_shards(odd), std::vector<std::string>{odd});
  EXPECT_EQ(expand_shards(dir.file("missing.h5")), std::vector<std::string>{dir.file("missing.h5")});
}

TEST(ShardList, ListsKeepTheirOrderAndGlobsAreSorted) {
  TempDir dir;
  for (const char* name : {"t-2.h5", "t-10.h5", "t-1.h5", "other.h5", "t-x.txt"}) touch(dir.file(name));
  EXPECT_EQ(expand_shards(dir.file("t-2.h5") + "," + dir.file("t-1.h5")),
            (std::vector<std::string>{dir.file("t-2.h5"), dir.file("t-1.h5")}));
  EXPECT_EQ(expand_shards(dir.file("t-*.h5")),
            (std::vector<std::string>{dir.file("t-1.h5"), dir.file("t-10.h5"), dir.file("t-2.h5")}));
  EXPECT_EQ(expand_shards(dir.file("t-?.h5") + "," + dir.file("other.h5")),
            (std::vector<std::string>{dir.file("t-1.h5"), dir.file("t-2.h5"), dir.file("other.h5")}));
}

TEST(ShardList, GlobsTakeRegularFilesOnly) {
  TempDir dir;
  touch(dir.file("s-1.h5"));
  fs::create_symlink(dir.file("s-1.h5"), dir.file("s-2.h5"));
  fs::create_directory(dir.file("s-3.h5"));
  EXPECT_EQ(expand_shards(dir.file("s-*.h5")), std::vector<std::string>{dir.file("s-1.h5")});
}

TEST(ShardList, MistakesNameThePart) {
  TempDir dir;
  touch(dir.file("a.h5"));
  expect_mentions(message_of<InputError>([&] { expand_shards(dir.file("none-*.h5")); }), {"no regular file", "none-*.h5"});
  expect_mentions(message_of<InputError>([&] { expand_shards(dir.file("*") + "/a.h5"); }), {"wildcard in its folder"});
  expect_mentions(message_of<InputError>([&] { expand_shards(dir.file("a.h5") + ","); }), {"empty entry"});
  expect_mentions(message_of<InputError>([&] { expand_shards(dir.file("a.h5") + "," + dir.file("*.h5")); }),
                  {"named twice", "a.h5"});
}

constexpr int64_t kSamples = 103;
const Shape kSample = {3, 4, 5};
constexpr int64_t kNumel = 60;

Dataset make_images() {
  Dataset dataset;
  dataset.size = kSamples;
  dataset.sample_shape = kSample;
  dataset.num_classes = 10;
  dataset.images.resize(static_cast<size_t>(kSamples * kNumel));
  for (size_t i = 0; i < dataset.images.size(); ++i) dataset.images[i] = static_cast<uint8_t>((i * 37 + i / 11) % 256);
  dataset.labels.resize(kSamples);
  for (int64_t i = 0; i < kSamples; ++i) dataset.labels[static_cast<size_t>(i)] = static_cast<uint8_t>((i * 7) % 10);
  return dataset;
}

// Every batch of two shuffled epochs on two replicas equals the one-file set's, bit for bit.
void expect_same_batches(const Dataset& a, const Dataset& b) {
  ASSERT_EQ(a.size, b.size);
  EXPECT_EQ(a.labels, b.labels);
  for (int rank = 0; rank < 2; ++rank) {
    ShardedSampler sampler(kSamples, 16, rank, 2, /*seed=*/5, /*shuffle=*/true);
    for (int64_t epoch = 0; epoch < 2; ++epoch) {
      sampler.set_epoch(epoch);
      for (int64_t step = 0; step < sampler.steps_per_epoch(); ++step) {
        Tensor a_images, a_labels, b_images, b_labels;
        assemble_batch(a, sampler.replica_indices(step), a_images, a_labels);
        assemble_batch(b, sampler.replica_indices(step), b_images, b_labels);
        ASSERT_EQ(a_images.bytes(), b_images.bytes());
        EXPECT_EQ(std::memcmp(a_images.raw(), b_images.raw(), a_images.bytes()), 0) << "epoch " << epoch;
        EXPECT_EQ(std::memcmp(a_labels.raw(), b_labels.raw(), a_labels.bytes()), 0) << "epoch " << epoch;
      }
    }
  }
}

TEST(ImageShards, FourShardsReadAsTheOneFile) {
  TempDir dir;
  const Dataset images = make_images();
  write_hdf5_dataset(dir.file("whole.h5"), images);
  // 27 samples of 61 bytes a shard: 27, 27, 27, 22.
  const std::vector<std::string> paths = write_hdf5_shards(dir.file("part.h5"), images, 27 * (kNumel + 1));
  ASSERT_EQ(paths.size(), 4u);
  EXPECT_EQ(paths[0], dir.file("part-00000-of-00004.h5"));
  EXPECT_EQ(paths[3], dir.file("part-00003-of-00004.h5"));
  EXPECT_EQ(load_hdf5_dataset(paths[3]).size, 22);

  const Dataset whole = load_hdf5_dataset(dir.file("whole.h5"));
  const Dataset in_memory = load_hdf5_dataset(dir.file("part-*-of-00004.h5"));
  ASSERT_TRUE(in_memory.in_memory());
  EXPECT_EQ(in_memory.images, whole.images);
  EXPECT_EQ(in_memory.sample_shape, kSample);
  expect_same_batches(whole, in_memory);

  const Dataset cached = load_hdf5_dataset(dir.file("part-*-of-00004.h5"), 1000);  // below one shard's pixels
  ASSERT_FALSE(cached.in_memory());
  expect_same_batches(whole, cached);
  EXPECT_LE(cached.cache->stats().peak_resident_bytes, cached.cache->stats().capacity_bytes);
}

TEST(ImageShards, ShardsThatDisagreeAreNamed) {
  TempDir dir;
  const Dataset images = make_images();
  write_hdf5_dataset(dir.file("a.h5"), images);
  Dataset other = images;
  other.num_classes = 12;
  write_hdf5_dataset(dir.file("b.h5"), other);
  expect_mentions(message_of<InputError>([&] { load_hdf5_dataset(dir.file("a.h5") + "," + dir.file("b.h5")); }),
                  {"b.h5", "num_classes is 12", "first shard", "a.h5", "has 10"});
  other = images;
  other.sample_shape = {1, 12, 5};
  write_hdf5_dataset(dir.file("c.h5"), other);
  expect_mentions(message_of<InputError>([&] { load_hdf5_dataset(dir.file("a.h5") + "," + dir.file("c.h5"), 1000); }),
                  {"c.h5", "/images sample shape", "[1, 12, 5]", "[3, 4, 5]"});
  other = images;
  other.pixel_scale = 0.5f;
  write_hdf5_dataset(dir.file("d.h5"), other);
  expect_mentions(message_of<InputError>([&] { load_hdf5_dataset(dir.file("a.h5") + "," + dir.file("d.h5")); }),
                  {"d.h5", "pixel_scale is 0.5"});
}

std::vector<uint8_t> token_bytes(size_t n) {
  std::vector<uint8_t> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>((i * 131 + i / 7) % 256);
  return bytes;
}

TEST(TokenShards, WindowsAcrossShardsReadAsTheOneFile) {
  TempDir dir;
  const std::vector<uint8_t> bytes = token_bytes(10000);
  write_token_file(dir.file("whole.h5"), bytes, {});
  const size_t cuts[] = {0, 3001, 3002, 7500, 10000};  // a shard of one token among them
  for (int i = 0; i < 4; ++i)
    write_token_file(dir.file(str_cat("tok-", i, ".h5")),
                     std::span<const uint8_t>(bytes).subspan(cuts[i], cuts[i + 1] - cuts[i]), {});
  TokenDataset whole(dir.file("whole.h5"), {.cache_bytes = 0});
  TokenDataset sharded(dir.file("tok-*.h5"), {.cache_bytes = 4096, .block_tokens = 512});
  ASSERT_EQ(sharded.size(), 10000);
  EXPECT_EQ(sharded.info().path, dir.file("tok-*.h5"));
  for (const int64_t offset : {int64_t{0}, int64_t{2990}, int64_t{3001}, int64_t{7000}, int64_t{9871}}) {
    std::vector<int32_t> a(129), b(129);
    whole.read(offset, 129, a.data());
    const int64_t start[] = {offset};
    sharded.prefetch(start, 129);
    sharded.read(offset, 129, b.data());
    EXPECT_EQ(a, b) << "offset " << offset;
  }
}

TEST(TokenShards, ShardsThatDisagreeAreNamed) {
  TempDir dir;
  const std::vector<uint8_t> bytes = token_bytes(2000);
  write_token_file(dir.file("a.h5"), bytes, {});
  const std::vector<uint16_t> wide(bytes.begin(), bytes.end());
  write_token_file(dir.file("b.h5"), std::span<const uint16_t>(wide), {.tokenizer = kByteTokenizer, .vocab_size = 256});
  expect_mentions(message_of<InputError>([&] { TokenDataset(dir.file("a.h5") + "," + dir.file("b.h5")); }),
                  {"b.h5", "/tokens type is uint16", "a.h5", "uint8"});
}

}  // namespace
}  // namespace mirrored::data
