#include <gtest/gtest.h>

#include "error_matchers.h"
#include "mirrored/core/error.h"
#include "mirrored/io/hdf5.h"
#include "temp_dir.h"

namespace mirrored::io {
namespace {

using mirrored::testing::expect_mentions;
using mirrored::testing::message_of;
using mirrored::testing::TempDir;

TEST(H5File, WritesCreateIntermediateGroups) {
  TempDir dir;
  const std::string path = dir.file("f.h5");
  const std::vector<float> values = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, 8.0f};
  {
    H5File file(path, H5File::Access::kTruncate);
    file.write_f32("/params/0.linear.weight", {2, 3}, values.data());
  }
  const H5File file(path, H5File::Access::kRead);
  EXPECT_TRUE(file.exists("/params"));
  EXPECT_TRUE(file.exists("/params/0.linear.weight"));
  EXPECT_FALSE(file.exists("/params/1.linear.weight"));
  EXPECT_FALSE(file.exists("/absent/group/dataset"));
  EXPECT_EQ(file.shape("/params/0.linear.weight"), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(file.type_class("/params/0.linear.weight"), H5T_FLOAT);
  EXPECT_EQ(file.read_f32("/params/0.linear.weight"), values);
}

TEST(H5File, CompressedBytesAndIntegersRoundTrip) {
  TempDir dir;
  const std::string path = dir.file("f.h5");
  std::vector<uint8_t> bytes(3000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i % 251);
  const std::vector<int64_t> wide = {-5, 0, int64_t{1} << 40};
  {
    H5File file(path, H5File::Access::kTruncate);
    file.write_u8("/images", {30, 10, 10}, bytes.data(), /*compress=*/true);
    file.write_i64("/wide", {3}, wide.data());
  }
  const H5File file(path, H5File::Access::kRead);
  EXPECT_EQ(file.read_u8("/images"), bytes);
  EXPECT_EQ(file.read_i64("/wide"), wide);
  EXPECT_EQ(file.type_class("/wide"), H5T_INTEGER);
}

TEST(H5File, AttributesRoundTripAndReplace) {
  TempDir dir;
  const std::string path = dir.file("f.h5");
  {
    H5File file(path, H5File::Access::kTruncate);
    file.write_attribute("num_classes", int64_t{7});
    file.write_attribute("num_classes", int64_t{10});
    file.write_attribute("model", std::string("mlp:784-128-10"));
  }
  const H5File file(path, H5File::Access::kRead);
  EXPECT_TRUE(file.has_attribute("num_classes"));
  EXPECT_FALSE(file.has_attribute("epoch"));
  EXPECT_EQ(file.read_int_attribute("num_classes"), 10);
  EXPECT_EQ(file.read_string_attribute("model"), "mlp:784-128-10");
  expect_mentions(message_of<InputError>([&] { file.read_int_attribute("epoch"); }),
                  {path, "epoch", "missing"});
  expect_mentions(message_of<InputError>([&] { file.read_int_attribute("model"); }),
                  {path, "model", "not an integer"});
}

TEST(H5File, MissingDatasetIsAnInputError) {
  TempDir dir;
  const std::string path = dir.file("f.h5");
  H5File(path, H5File::Access::kTruncate).flush();
  const H5File file(path, H5File::Access::kRead);
  expect_mentions(message_of<InputError>([&] { file.shape("/labels"); }),
                  {path, "dataset /labels is missing"});
}

// A failure inside HDF5 is not the user's fault: it must say where in our code and which
// call failed, and HDF5 must not have printed its own error stack on the way.
TEST(H5File, LibraryFailureSaysWhichCallAndStaysQuiet) {
  TempDir dir;
  const std::string path = dir.file("f.h5");
  H5File file(path, H5File::Access::kTruncate);
  const std::vector<uint8_t> bytes = {1, 2};
  file.write_u8("/x", {2}, bytes.data());

  ::testing::internal::CaptureStderr();
  const std::string message = message_of<Error>([&] { file.write_u8("/x", {2}, bytes.data()); });
  const std::string printed = ::testing::internal::GetCapturedStderr();
  expect_mentions(message, {"hdf5.cpp:", "H5Dcreate2", path, "/x", "failed"});
  EXPECT_EQ(printed, "");
}

TEST(H5File, CreatingInAMissingDirectoryFails) {
  TempDir dir;
  const std::string path = dir.file("no/such/dir/f.h5");
  expect_mentions(message_of<Error>([&] { H5File(path, H5File::Access::kTruncate); }),
                  {"H5Fcreate", path});
}

TEST(H5Handle, MoveTransfersOwnership) {
  H5Handle a(H5Screate(H5S_SCALAR), H5Sclose);
  ASSERT_TRUE(a.valid());
  const hid_t id = a.get();
  H5Handle b(std::move(a));
  EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): the moved-from state is the point
  EXPECT_EQ(b.get(), id);
  H5Handle c;
  c = std::move(b);
  EXPECT_EQ(c.get(), id);
  c.reset();
  EXPECT_FALSE(c.valid());
}

}  // namespace
}  // namespace mirrored::io
