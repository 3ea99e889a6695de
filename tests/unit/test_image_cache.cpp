// An image file larger than data.cache_mb is read through a bounded block cache: its
// batches must have the bits of the same file loaded whole, whatever the order of reads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "error_matchers.h"
#include "mirrored/core/error.h"
#include "mirrored/data/dataset.h"
#include "mirrored/data/hdf5_dataset.h"
#include "mirrored/data/image_cache.h"
#include "mirrored/data/sampler.h"
#include "mirrored/io/hdf5.h"
#include "temp_dir.h"

namespace mirrored::data {
namespace {

using io::H5File;
using mirrored::testing::expect_mentions;
using mirrored::testing::message_of;
using mirrored::testing::TempDir;

constexpr int64_t kSamples = 103;           // not a multiple of any block size below
const Shape kImageShape = {kSamples, 3, 4, 5};  // [N, C, H, W]
constexpr int64_t kSampleNumel = 3 * 4 * 5;
constexpr int64_t kTinyBudget = 4000;       // bytes: below every file here

std::vector<uint8_t> labels() {
  std::vector<uint8_t> out(kSamples);
  for (int64_t i = 0; i < kSamples; ++i) out[static_cast<size_t>(i)] = static_cast<uint8_t>((i * 7) % 10);
  return out;
}

// Bytes, compressed: chunked storage, so the cache reads parts of one HDF5 chunk.
std::string write_bytes(const TempDir& dir) {
  const std::string path = dir.file("bytes.h5");
  std::vector<uint8_t> pixels(static_cast<size_t>(kSamples * kSampleNumel));
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>((i * 37 + i / 11) % 256);
  H5File file(path, H5File::Access::kTruncate);
  file.write_u8("/images", kImageShape, pixels.data(), /*compress=*/true);
  file.write_u8("/labels", {kSamples}, labels().data());
  return path;
}

// Float32 pixel values with fractions, contiguous storage; optionally with a pixel_scale.
std::string write_floats(const TempDir& dir, const std::string& name, bool scaled) {
  const std::string path = dir.file(name);
  std::vector<float> pixels(static_cast<size_t>(kSamples * kSampleNumel));
  for (size_t i = 0; i < pixels.size(); ++i)
    pixels[i] = scaled ? std::sin(static_cast<float>(i)) * 3.7f : static_cast<float>(i % 2551) / 10.0f;
  H5File file(path, H5File::Access::kTruncate);
  file.write_f32("/images", kImageShape, pixels.data());
  file.write_u8("/labels", {kSamples}, labels().data());
  if (scaled) file.write_real_attribute("pixel_scale", 0.37);
  return path;
}

// Integer pixels stored wider than a byte: narrowed with a range check on every read.
std::string write_wide(const TempDir& dir, int64_t bad_sample = -1) {
  const std::string path = dir.file("wide.h5");
  std::vector<int64_t> pixels(static_cast<size_t>(kSamples * kSampleNumel));
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<int64_t>((i * 11) % 256);
  if (bad_sample >= 0) pixels[static_cast<size_t>(bad_sample * kSampleNumel + 5)] = 300;
  H5File file(path, H5File::Access::kTruncate);
  file.write_i64("/images", kImageShape, pixels.data());
  file.write_u8("/labels", {kSamples}, labels().data());
  return path;
}

// Every batch of a shuffled training epoch (batch 8, two replicas) and of contiguous
// evaluation ranges, read through the cache, equals the in-memory batch bit for bit.
void expect_same_batches(const std::string& path) {
  const Dataset whole = load_hdf5_dataset(path);
  const Dataset cached = load_hdf5_dataset(path, kTinyBudget);
  ASSERT_TRUE(whole.in_memory());
  ASSERT_FALSE(cached.in_memory());
  EXPECT_TRUE(cached.images.empty());
  EXPECT_TRUE(cached.float_images.empty());
  EXPECT_EQ(cached.labels, whole.labels);
  EXPECT_EQ(cached.sample_shape, whole.sample_shape);

  int64_t batches = 0;
  const auto compare = [&](std::span<const int64_t> indices) {
    Tensor whole_images, whole_labels, cached_images, cached_labels;
    assemble_batch(whole, indices, whole_images, whole_labels);
    assemble_batch(cached, indices, cached_images, cached_labels);
    ASSERT_EQ(cached_images.bytes(), whole_images.bytes());
    EXPECT_EQ(std::memcmp(cached_images.raw(), whole_images.raw(), whole_images.bytes()), 0) << "batch " << batches;
    EXPECT_EQ(std::memcmp(cached_labels.raw(), whole_labels.raw(), whole_labels.bytes()), 0) << "batch " << batches;
    ++batches;
  };
  for (int rank = 0; rank < 2; ++rank) {
    ShardedSampler sampler(kSamples, 16, rank, 2, /*seed=*/5, /*shuffle=*/true);
    for (int64_t epoch = 0; epoch < 2; ++epoch) {
      sampler.set_epoch(epoch);
      for (int64_t step = 0; step < sampler.steps_per_epoch(); ++step) compare(sampler.replica_indices(step));
    }
  }
  std::vector<int64_t> all(kSamples);
  for (int64_t i = 0; i < kSamples; ++i) all[static_cast<size_t>(i)] = i;
  for (int64_t begin = 0; begin < kSamples; begin += 10)
    compare(std::span<const int64_t>(all).subspan(static_cast<size_t>(begin),
                                                  static_cast<size_t>(std::min<int64_t>(10, kSamples - begin))));
  EXPECT_EQ(batches, 2 * 2 * (kSamples / 16) + 11);

  const ImageCacheStats stats = cached.cache->stats();
  EXPECT_GT(stats.misses, 0);
  EXPECT_EQ(stats.capacity_bytes, kTinyBudget);
  EXPECT_LE(stats.peak_resident_bytes, stats.capacity_bytes);
  EXPECT_GT(stats.peak_resident_bytes, 0);
}

TEST(ImageCache, BytesReadInBlocksMatchTheWholeFile) {
  TempDir dir;
  expect_same_batches(write_bytes(dir));
}

TEST(ImageCache, FloatsReadInBlocksMatchTheWholeFile) {
  TempDir dir;
  expect_same_batches(write_floats(dir, "floats.h5", /*scaled=*/false));
  expect_same_batches(write_floats(dir, "scaled.h5", /*scaled=*/true));
}

TEST(ImageCache, WideIntegersReadInBlocksMatchTheWholeFile) {
  TempDir dir;
  expect_same_batches(write_wide(dir));
}

TEST(ImageCache, FilesWithinTheBudgetAreLoadedWhole) {
  TempDir dir;
  const std::string path = write_bytes(dir);
  EXPECT_TRUE(load_hdf5_dataset(path, kSamples * kSampleNumel).in_memory());
  EXPECT_FALSE(load_hdf5_dataset(path, kSamples * kSampleNumel - 1).in_memory());
  EXPECT_TRUE(load_hdf5_dataset(path, 0).in_memory());  // 0: no bound
}

// The device prefetcher's worker assembles training batches while the main thread may
// assemble evaluation ones from the same dataset.
TEST(ImageCache, SeveralThreadsReadTheSameBits) {
  hbool_t thread_safe = 0;
  if (H5is_library_threadsafe(&thread_safe) < 0 || !thread_safe)
    GTEST_SKIP() << "this HDF5 library is not built thread-safe: the cache refuses reads from other threads";
  TempDir dir;
  const std::string path = write_floats(dir, "floats.h5", /*scaled=*/false);
  const Dataset whole = load_hdf5_dataset(path);
  const Dataset cached = load_hdf5_dataset(path, kTinyBudget);
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const std::vector<int64_t> order = epoch_permutation(kSamples, 11, t);
      for (int repeat = 0; repeat < 20; ++repeat) {
        for (size_t begin = 0; begin + 4 <= order.size(); begin += 4) {
          const std::span<const int64_t> indices(order.data() + begin, 4);
          Tensor a, b, la, lb;
          assemble_batch(whole, indices, a, la);
          assemble_batch(cached, indices, b, lb);
          if (std::memcmp(a.raw(), b.raw(), a.bytes()) != 0) ++mismatches[static_cast<size_t>(t)];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
  const ImageCacheStats stats = cached.cache->stats();
  EXPECT_LE(stats.peak_resident_bytes, stats.capacity_bytes);
}

// The whole-file checks hold on the cached path too, with the same messages.
TEST(ImageCache, BadPixelsAreRefusedAtLoadAsWhenLoadedWhole) {
  TempDir dir;
  const std::string wide = write_wide(dir, /*bad_sample=*/97);
  for (const int64_t budget : {int64_t{0}, kTinyBudget}) {
    expect_mentions(message_of<InputError>([&] { load_hdf5_dataset(wide, budget); }),
                    {wide, "/images", "300", "sample 97", "[0, 255]"});
  }
  const std::string floats = dir.file("nan.h5");
  {
    std::vector<float> pixels(static_cast<size_t>(kSamples * kSampleNumel), 12.0f);
    pixels[static_cast<size_t>(88 * kSampleNumel)] = std::nanf("");
    H5File file(floats, H5File::Access::kTruncate);
    file.write_f32("/images", kImageShape, pixels.data());
    file.write_u8("/labels", {kSamples}, labels().data());
  }
  for (const int64_t budget : {int64_t{0}, kTinyBudget}) {
    expect_mentions(message_of<InputError>([&] { load_hdf5_dataset(floats, budget); }),
                    {floats, "/images", "NaN", "sample 88"});
  }
}

// The io layer refuses a dataset that declares far more bytes than the file stores; the
// cached path, which never reads it whole, refuses it too.
TEST(ImageCache, ExtentBeyondTheStoredBytesIsCorrupt) {
  TempDir dir;
  const std::string path = dir.file("extent.h5");
  constexpr hsize_t kHuge = hsize_t{1} << 20;  // samples; 18 pixel bytes are stored
  {
    H5File file(path, H5File::Access::kTruncate);
    const std::vector<uint8_t> label_values(kHuge, 1);
    file.write_u8("/labels", {static_cast<int64_t>(kHuge)}, label_values.data(), /*compress=*/true);
    const hsize_t dims[3] = {2, 3, 3}, max_dims[3] = {H5S_UNLIMITED, 3, 3}, chunk[3] = {1, 3, 3};
    const io::H5Handle space(H5Screate_simple(3, dims, max_dims), H5Sclose);
    const io::H5Handle props(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    H5Pset_chunk(props.get(), 3, chunk);
    const io::H5Handle set(
        H5Dcreate2(file.id(), "/images", H5T_STD_U8LE, space.get(), H5P_DEFAULT, props.get(), H5P_DEFAULT), H5Dclose);
    const std::vector<uint8_t> pixels(18, 9);
    H5Dwrite(set.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, pixels.data());
    const hsize_t huge[3] = {kHuge, 3, 3};
    ASSERT_GE(H5Dset_extent(set.get(), huge), 0);
  }
  expect_mentions(message_of<InputError>([&] { load_hdf5_dataset(path, kTinyBudget); }),
                  {path, "/images", "declares 9437184 bytes", "truncated or corrupt"});
}

// A file damaged after it was opened (its compressed pixels overwritten): the failing
// read names the file and the samples.
TEST(ImageCache, AFailedReadNamesTheFile) {
  TempDir dir;
  const std::string path = write_bytes(dir);
  const Dataset cached = load_hdf5_dataset(path, kTinyBudget);
  ASSERT_FALSE(cached.in_memory());
  haddr_t address = 0;
  hsize_t stored_bytes = 0;
  {
    const H5File file(path, H5File::Access::kRead);
    const io::H5Handle images(H5Dopen2(file.id(), "/images", H5P_DEFAULT), H5Dclose);
    const hsize_t origin[4] = {0, 0, 0, 0};
    unsigned filters = 0;
    ASSERT_GE(H5Dget_chunk_info_by_coord(images.get(), origin, &filters, &address, &stored_bytes), 0);
  }
  {
    std::fstream raw(path, std::ios::in | std::ios::out | std::ios::binary);
    raw.seekp(static_cast<std::streamoff>(address));
    const std::vector<char> garbage(stored_bytes, '\x5a');
    raw.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  const std::vector<int64_t> indices = {kSamples - 1};
  Tensor images, batch_labels;
  expect_mentions(message_of<InputError>([&] { assemble_batch(cached, indices, images, batch_labels); }),
                  {path, "/images", "H5Dread", "samples ["});
}

}  // namespace
}  // namespace mirrored::data
