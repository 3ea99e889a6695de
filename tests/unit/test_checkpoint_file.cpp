#include <gtest/gtest.h>
#include <hdf5.h>

#include <filesystem>
#include <cstring>
#include <fstream>

#include "error_matchers.h"
#include "mirrored/checkpoint/run_directory.h"
#include "mirrored/core/error.h"
#include "mirrored/io/checkpoint_file.h"
#include "mirrored/io/crc32_ieee.h"
#include "mirrored/io/hdf5.h"
#include "mirrored/train/checkpointer.h"
#include "temp_dir.h"

namespace mirrored::io {
namespace {

using mirrored::testing::expect_mentions;
using mirrored::testing::TempDir;

Checkpoint sample_checkpoint() {
  Checkpoint c;
  c.step = 120;
  c.epoch = 1;
  c.step_in_epoch = 20;
  c.steps_per_epoch = 100;
  c.world_size = 4;
  c.optimizer = "adam";
  c.optimizer_steps = 118;
  c.config = "batch_size = 64\n[model]\nhidden = 8\n";
  c.params.push_back({"0.linear.weight", {3, 2}, {1.5f, -2.0f, 3.25f, 0.0f, -0.0f, 1e-30f}});
  c.params.push_back({"0.linear.bias", {3}, {0.1f, 0.2f, 0.3f}});
  c.buffers.push_back({"1.batchnorm.running_mean", {2}, {0.5f, -0.25f}});
  c.buffers.push_back({"1.batchnorm.running_var", {2}, {1.0f, 3.5f}});
  c.optimizer_state.push_back({"m", {9}, std::vector<float>(9, 0.5f)});
  c.optimizer_state.push_back({"v", {9}, std::vector<float>(9, 0.25f)});
  return c;
}

void expect_same(const std::vector<CheckpointTensor>& a, const std::vector<CheckpointTensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].shape, b[i].shape);
    EXPECT_EQ(0, std::memcmp(a[i].values.data(), b[i].values.data(), a[i].values.size() * sizeof(float)))
        << a[i].name << " differs bitwise";
  }
}

std::string failure_of(const std::string& path) {
  try {
    read_checkpoint(path);
  } catch (const InputError& e) {
    EXPECT_EQ(e.code(), ExitCode::kCheckpoint);
    return e.what();
  }
  ADD_FAILURE() << "read_checkpoint('" << path << "') accepted a bad file";
  return {};
}

// File offset of a contiguous dataset's raw bytes, to corrupt exactly the payload.
haddr_t raw_offset(const std::string& path, const std::string& dataset) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t set = H5Dopen2(file, dataset.c_str(), H5P_DEFAULT);
  const haddr_t offset = H5Dget_offset(set);
  H5Dclose(set);
  H5Fclose(file);
  return offset;
}

void flip_byte(const std::string& path, std::streamoff offset) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekg(offset);
  char byte = 0;
  file.get(byte);
  file.seekp(offset);
  file.put(static_cast<char>(byte ^ 0x10));
}

TEST(CheckpointFile, RoundTripIsBitExact) {
  TempDir dir;
  const Checkpoint written = sample_checkpoint();
  write_checkpoint(dir.file("c.h5"), written);
  const Checkpoint read = read_checkpoint(dir.file("c.h5"));
  EXPECT_EQ(read.format_version, kCheckpointFormatVersion);
  EXPECT_EQ(read.step, 120);
  EXPECT_EQ(read.epoch, 1);
  EXPECT_EQ(read.step_in_epoch, 20);
  EXPECT_EQ(read.steps_per_epoch, 100);
  EXPECT_EQ(read.world_size, 4);
  EXPECT_EQ(read.optimizer, "adam");
  EXPECT_EQ(read.optimizer_steps, 118);
  EXPECT_EQ(read.config, written.config);
  expect_same(read.params, written.params);
  expect_same(read.buffers, written.buffers);
  expect_same(read.optimizer_state, written.optimizer_state);
  // Nothing but the file itself is left behind (the temporary was renamed).
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
}

TEST(CheckpointFile, ParametersUseTheFinalH5Layout) {
  TempDir dir;
  write_checkpoint(dir.file("c.h5"), sample_checkpoint());
  const H5File file(dir.file("c.h5"), H5File::Access::kRead);
  EXPECT_EQ(file.shape("/params/0.linear.weight"), (Shape{3, 2}));
  EXPECT_EQ(file.read_f32("/params/0.linear.bias"), (std::vector<float>{0.1f, 0.2f, 0.3f}));
}

TEST(CheckpointFile, ChecksumCoversValuesNamesAndCounters) {
  const Checkpoint base = sample_checkpoint();
  const uint32_t crc = checkpoint_crc32(base);
  Checkpoint changed = base;
  changed.params[0].values[5] = 2e-30f;
  EXPECT_NE(checkpoint_crc32(changed), crc);
  changed = base;
  changed.buffers[1].values[0] = 1.5f;
  EXPECT_NE(checkpoint_crc32(changed), crc);
  changed = base;
  changed.optimizer_state[1].name = "w";
  EXPECT_NE(checkpoint_crc32(changed), crc);
  changed = base;
  changed.step = 121;
  EXPECT_NE(checkpoint_crc32(changed), crc);
  changed = base;
  changed.config += " ";
  EXPECT_NE(checkpoint_crc32(changed), crc);
}

TEST(CheckpointFile, AValuesCrcTakenOnTheWayStandsInForTheValuesAndIsUsed) {
  const Checkpoint base = sample_checkpoint();
  Checkpoint joined = base;
  for (auto* tensors : {&joined.params, &joined.optimizer_state})
    for (CheckpointTensor& tensor : *tensors)
      tensor.values_crc = crc32_ieee(tensor.values.data(), tensor.values.size() * sizeof(float));
  EXPECT_EQ(checkpoint_crc32(joined), checkpoint_crc32(base));
  // Used, not recomputed: a wrong one changes the checksum (and a file read back from it
  // would be refused).
  joined.optimizer_state[0].values_crc = *joined.optimizer_state[0].values_crc ^ 1u;
  EXPECT_NE(checkpoint_crc32(joined), checkpoint_crc32(base));
  TempDir dir;
  write_checkpoint(dir.file("c.h5"), joined);
  expect_mentions(failure_of(dir.file("c.h5")), {"checksum mismatch"});
}

TEST(CheckpointFile, FlippedPayloadByteIsAChecksumMismatch) {
  TempDir dir;
  const std::string path = dir.file("c.h5");
  write_checkpoint(path, sample_checkpoint());
  const haddr_t offset = raw_offset(path, "/params/0.linear.weight");
  ASSERT_NE(offset, HADDR_UNDEF);
  flip_byte(path, static_cast<std::streamoff>(offset) + 2);
  expect_mentions(failure_of(path), {path, "checksum mismatch", "corrupt"});
}

TEST(CheckpointFile, TruncatedFileIsRefused) {
  TempDir dir;
  const std::string path = dir.file("c.h5");
  write_checkpoint(path, sample_checkpoint());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  expect_mentions(failure_of(path), {path});
}

TEST(CheckpointFile, OtherFormatVersionIsRefused) {
  TempDir dir;
  const std::string path = dir.file("c.h5");
  write_checkpoint(path, sample_checkpoint());
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  const hid_t attribute = H5Aopen_by_name(file, "/", "format_version", H5P_DEFAULT, H5P_DEFAULT);
  const int64_t version = kCheckpointFormatVersion + 1;
  ASSERT_GE(H5Awrite(attribute, H5T_NATIVE_INT64, &version), 0);
  H5Aclose(attribute);
  H5Fclose(file);
  expect_mentions(failure_of(path), {path, "format version 3", "reads versions 1 to 2"});
}

TEST(CheckpointFile, VersionOneFilesAreReadWithoutBuffers) {
  TempDir dir;
  Checkpoint old = sample_checkpoint();
  old.format_version = 1;  // before running statistics were saved
  old.buffers.clear();
  write_checkpoint(dir.file("v1.h5"), old);
  const Checkpoint read = read_checkpoint(dir.file("v1.h5"));
  EXPECT_EQ(read.format_version, 1);
  EXPECT_TRUE(read.buffers.empty());
  expect_same(read.params, old.params);
}

TEST(CheckpointFile, OtherHdf5FilesAndMissingFilesAreRefused) {
  TempDir dir;
  {
    H5File other(dir.file("data.h5"), H5File::Access::kTruncate);
    const std::vector<uint8_t> labels = {1, 2};
    other.write_u8("/labels", {2}, labels.data());
  }
  expect_mentions(failure_of(dir.file("data.h5")), {"not a mirrored checkpoint"});
  expect_mentions(failure_of(dir.file("none.h5")), {"none.h5", "does not exist"});
  std::ofstream(dir.file("text.h5")) << "hello";
  expect_mentions(failure_of(dir.file("text.h5")), {"text.h5", "not an HDF5 file"});
}

TEST(CheckpointFile, UnwritableDirectoryIsACheckpointError) {
  const Checkpoint c = sample_checkpoint();
  try {
    write_checkpoint("/nonexistent-dir/c.h5", c);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kCheckpoint);
    expect_mentions(e.what(), {"/nonexistent-dir/c.h5"});
  }
}

TEST(Checkpointer, ListsNewestFirstAndIgnoresOtherFiles) {
  TempDir dir;
  for (int64_t step : {40, 300, 7})
    write_checkpoint(dir.file(checkpoint::checkpoint_file_name(step)), sample_checkpoint());
  std::ofstream(dir.file("ckpt-000000500.h5.tmp.123")) << "partial";
  std::ofstream(dir.file("notes.txt")) << "x";
  EXPECT_EQ(checkpoint::checkpoint_file_name(300), "ckpt-000000300.h5");
  const auto listed = checkpoint::list_checkpoints(dir.path().string());
  ASSERT_EQ(listed.size(), 3u);
  EXPECT_EQ(listed[0], dir.file("ckpt-000000300.h5"));
  EXPECT_EQ(listed[1], dir.file("ckpt-000000040.h5"));
  EXPECT_EQ(listed[2], dir.file("ckpt-000000007.h5"));
  EXPECT_TRUE(checkpoint::list_checkpoints(dir.file("missing")).empty());
}

TEST(RunDirectory, ResumedMetricsKeepRecordsUpToTheResumeStep) {
  TempDir dir;
  config::TrainConfig config;
  config.out = dir.file("run");
  {
    checkpoint::RunDirectory run(config, true);
    for (int64_t step : {10, 20, 30}) run.log_metrics({{"kind", std::string("train")}, {"step", step}});
  }
  {
    std::ofstream(dir.file("run/metrics.jsonl"), std::ios::app) << "{\"kind\": \"train\", \"st";  // a killed write
    checkpoint::RunDirectory run(config, true);
    run.open_metrics(20);
    run.log_metrics({{"kind", std::string("train")}, {"step", int64_t{30}}});
  }
  std::ifstream in(dir.file("run/metrics.jsonl"));
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text,
            "{\"kind\": \"train\", \"step\": 10}\n{\"kind\": \"train\", \"step\": 20}\n"
            "{\"kind\": \"train\", \"step\": 30}\n");
}

}  // namespace
}  // namespace mirrored::io
