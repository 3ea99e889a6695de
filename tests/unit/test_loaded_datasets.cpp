#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "mirrored/config/loaded_datasets.h"
#include "temp_dir.h"

namespace mirrored::config {
namespace {

using mirrored::testing::TempDir;

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A loader that counts its calls and returns a dataset of `size` samples.
struct CountingLoader {
  int calls = 0;
  int64_t size = 1;
  DatasetLoader loader() {
    return [this] {
      ++calls;
      auto dataset = std::make_shared<data::Dataset>();
      dataset->size = size;
      return std::shared_ptr<const data::Dataset>(dataset);
    };
  }
};

TEST(LoadedDatasets, KeptDatasetIsReusedWhileItsFileIsUnchanged) {
  keep_loaded_datasets();
  TempDir dir;
  const std::string path = dir.file("train.h5");
  write_file(path, "first");
  CountingLoader load;
  const auto first = load_or_reuse(path, 256, load.loader());
  const auto again = load_or_reuse(path, 256, load.loader());
  EXPECT_EQ(load.calls, 1);
  EXPECT_EQ(first.get(), again.get());
  // Another block-cache bound is another dataset.
  const auto bounded = load_or_reuse(path, 16, load.loader());
  EXPECT_EQ(load.calls, 2);
  EXPECT_NE(bounded.get(), first.get());
}

TEST(LoadedDatasets, FileReplacedSinceIsReadAgain) {
  keep_loaded_datasets();
  TempDir dir;
  const std::string path = dir.file("train.h5");
  write_file(path, "first");
  CountingLoader load;
  const auto first = load_or_reuse(path, 256, load.loader());
  // Replaced as core/file_replacement.h does: a new file renamed over the old one.
  write_file(dir.file("next"), "second, longer");
  std::filesystem::rename(dir.file("next"), path);
  load.size = 2;
  const auto second = load_or_reuse(path, 256, load.loader());
  EXPECT_EQ(load.calls, 2);
  EXPECT_EQ(second->size, 2);
  // The new one is kept in its place.
  EXPECT_EQ(load_or_reuse(path, 256, load.loader()).get(), second.get());
  EXPECT_EQ(load.calls, 2);
}

TEST(LoadedDatasets, MissingFileIsNeverKept) {
  keep_loaded_datasets();
  TempDir dir;
  CountingLoader load;
  (void)load_or_reuse(dir.file("absent.h5"), 256, load.loader());
  (void)load_or_reuse(dir.file("absent.h5"), 256, load.loader());
  EXPECT_EQ(load.calls, 2);  // the real loader reports the missing file each time
}

}  // namespace
}  // namespace mirrored::config
