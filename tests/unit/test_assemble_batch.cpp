#include <gtest/gtest.h>

#include <vector>

#include "mirrored/core/error.h"
#include "mirrored/data/dataset.h"

namespace mirrored::data {
namespace {

Dataset tiny_dataset() {
  Dataset dataset;
  dataset.source = "tiny";
  dataset.size = 3;
  dataset.sample_shape = {1, 1, 2};
  dataset.images = {0, 255, 51, 102, 1, 2};
  dataset.labels = {7, 3, 9};
  return dataset;
}

TEST(AssembleBatch, ScalesPixelsAndGathersLabels) {
  const Dataset dataset = tiny_dataset();
  Tensor images, labels;
  const std::vector<int64_t> indices = {2, 0};
  assemble_batch(dataset, indices, images, labels);
  EXPECT_EQ(images.shape(), (Shape{2, 1, 1, 2}));
  EXPECT_EQ(labels.shape(), (Shape{2}));
  EXPECT_EQ(labels.dtype(), DType::kI32);
  const std::vector<float> pixels = images.to_vector();
  EXPECT_EQ(pixels, (std::vector<float>{1 / 255.0f, 2 / 255.0f, 0.0f, 1.0f}));
  EXPECT_EQ(labels.data<int32_t>()[0], 9);
  EXPECT_EQ(labels.data<int32_t>()[1], 7);
}

TEST(AssembleBatch, ReusesStorageForASmallerBatch) {
  const Dataset dataset = tiny_dataset();
  Tensor images, labels;
  const std::vector<int64_t> full = {0, 1, 2};
  assemble_batch(dataset, full, images, labels);
  const void* storage = images.raw();
  const std::vector<int64_t> last = {1};
  assemble_batch(dataset, last, images, labels);
  EXPECT_EQ(images.raw(), storage);
  EXPECT_EQ(images.to_vector(), (std::vector<float>{51 / 255.0f, 102 / 255.0f}));
}

TEST(AssembleBatch, IndexOutsideTheDatasetIsABug) {
  const Dataset dataset = tiny_dataset();
  Tensor images, labels;
  const std::vector<int64_t> indices = {0, 3};
  EXPECT_THROW(assemble_batch(dataset, indices, images, labels), Error);
}

}  // namespace
}  // namespace mirrored::data
