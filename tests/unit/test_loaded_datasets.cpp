#include <gtest/gtest.h>

#include <filesystem>

#include "mirrored/data/hdf5_dataset.h"
#include "mirrored/train/loaded_datasets.h"
#include "temp_dir.h"

namespace mirrored::train {
namespace {

using mirrored::testing::TempDir;

// An image set of `size` 1x2x2 samples written to `path`.
void write_images(const std::string& path, int64_t size) {
  data::Dataset set;
  set.size = size;
  set.sample_shape = {1, 2, 2};
  set.images.assign(static_cast<size_t>(size * 4), 7);
  set.labels.assign(static_cast<size_t>(size), 3);
  data::write_hdf5_dataset(path, set);
}

TEST(LoadedDatasets, KeptSetIsReusedWhileItsFileIsUnchanged) {
  TempDir dir;
  write_images(dir.file("train.h5"), 5);
  LoadedDatasets kept(true);
  const auto first = kept.images(dir.file("train.h5"), 256);
  EXPECT_EQ(kept.images(dir.file("train.h5"), 256).get(), first.get());
  EXPECT_EQ(first->size, 5);
  // Another block-cache bound is another data set.
  EXPECT_NE(kept.images(dir.file("train.h5"), 16).get(), first.get());
}

TEST(LoadedDatasets, WithoutKeepingEveryCallReadsTheFile) {
  TempDir dir;
  write_images(dir.file("train.h5"), 5);
  LoadedDatasets read_once(false);
  const auto first = read_once.images(dir.file("train.h5"), 256);
  EXPECT_NE(read_once.images(dir.file("train.h5"), 256).get(), first.get());
}

TEST(LoadedDatasets, FileReplacedSinceIsReadAgain) {
  TempDir dir;
  const std::string path = dir.file("train.h5");
  write_images(path, 5);
  LoadedDatasets kept(true);
  const auto first = kept.images(path, 256);
  // Replaced as core/file_replacement.h does: a new file renamed over the old one.
  write_images(dir.file("next.h5"), 6);
  std::filesystem::rename(dir.file("next.h5"), path);
  const auto second = kept.images(path, 256);
  EXPECT_EQ(second->size, 6);
  EXPECT_EQ(first->size, 5);  // a Trainer still holding the old one keeps it whole
  EXPECT_EQ(kept.images(path, 256).get(), second.get());  // the new one kept in its place
}

TEST(LoadedDatasets, MissingFileIsReportedEachTime) {
  TempDir dir;
  LoadedDatasets kept(true);
  EXPECT_THROW((void)kept.images(dir.file("absent.h5"), 256), InputError);
  EXPECT_THROW((void)kept.images(dir.file("absent.h5"), 256), InputError);
}

}  // namespace
}  // namespace mirrored::train
