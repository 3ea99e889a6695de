// A background checkpoint's snapshot (checkpoint/device_snapshot.h): on a GPU the copies run
// on a side stream into page-locked memory, yet the values equal the synchronous copy's bit
// for bit, also when the tensors are overwritten on the compute stream right after
// guard_overwrites() (the next update); buffers are reused by the next snapshot; and a
// checkpoint completed from a snapshot on the writer thread is the file a synchronous write
// makes. Run on the CPU and on cuda:0 (skipped without a GPU).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "devices.h"
#include "mirrored/checkpoint/checkpoint_writer.h"
#include "mirrored/checkpoint/device_snapshot.h"
#include "mirrored/io/checkpoint_file.h"
#include "temp_dir.h"

namespace mirrored::checkpoint {
namespace {

using mirrored::testing::DeviceTest;
using mirrored::testing::TempDir;

// Floats of every kind: random bit patterns (NaN payloads, infinities, subnormals, -0).
std::vector<float> random_bits(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<float> values(n);
  for (float& value : values) {
    const uint32_t bits = gen();
    std::memcpy(&value, &bits, sizeof bits);
  }
  return values;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class DeviceSnapshotTest : public DeviceTest {};

TEST_P(DeviceSnapshotTest, EqualsTheSynchronousCopyBitForBitThoughTheUpdateFollowsAtOnce) {
  // Large enough that the copy is still running when the overwrite is queued on a GPU.
  const Tensor params = on_device(Tensor::from(random_bits(size_t{1} << 22, 1), Shape{int64_t{1} << 22}));
  const Tensor state = on_device(Tensor::from(random_bits(1000, 2), Shape{10, 100}));
  const std::vector<float> params_before = params.to_vector(), state_before = state.to_vector();
  DeviceSnapshot snapshot;
  snapshot.take({params, state});
  snapshot.guard_overwrites();
  // The "update": queued on the compute stream after the guard, so after the copies.
  Tensor overwritten = params;
  kernels::copy(on_device(Tensor::from(random_bits(size_t{1} << 22, 3), params.shape())), overwritten);
  ASSERT_EQ(snapshot.size(), 2u);
  EXPECT_TRUE(same_bits(snapshot.values(0), params_before));
  EXPECT_TRUE(same_bits(snapshot.values(1), state_before));
  EXPECT_FALSE(same_bits(params.to_vector(), params_before));  // the overwrite did happen
  const std::vector<float> middle = snapshot.values(0, 1000, 17);
  EXPECT_TRUE(same_bits(middle, std::vector<float>(params_before.begin() + 1000, params_before.begin() + 1017)));
}

TEST_P(DeviceSnapshotTest, TheNextSnapshotReusesTheBuffersAndHoldsItsOwnValues) {
  DeviceSnapshot snapshot;
  const Tensor big = on_device(Tensor::from(random_bits(5000, 4), Shape{5000}));
  snapshot.take({big});
  snapshot.guard_overwrites();
  EXPECT_TRUE(same_bits(snapshot.values(0), big.to_vector()));
  // Fewer and smaller tensors: the old buffers serve, and only the new values are read.
  const Tensor small = on_device(Tensor::from(random_bits(300, 5), Shape{300}));
  snapshot.take({small});
  snapshot.guard_overwrites();
  snapshot.guard_overwrites();  // nothing pending any more: a no-op
  ASSERT_EQ(snapshot.size(), 1u);
  EXPECT_TRUE(same_bits(snapshot.values(0), small.to_vector()));
  EXPECT_THROW(snapshot.values(1), Error);
  EXPECT_THROW(snapshot.values(0, 290, 11), Error);
}

TEST_P(DeviceSnapshotTest, ACheckpointCompletedOnTheWriterThreadIsTheSynchronousOne) {
  TempDir dir;
  const Tensor params = on_device(Tensor::from(random_bits(4096, 6), Shape{4096}));
  io::Checkpoint checkpoint;
  checkpoint.step = 4;
  checkpoint.steps_per_epoch = 10;
  checkpoint.step_in_epoch = 4;
  checkpoint.optimizer = "sgd";
  checkpoint.params.push_back({"a", {1000}, {}});
  checkpoint.params.push_back({"b", {3096}, {}});
  io::Checkpoint synchronous = checkpoint;
  const std::vector<float> values = params.to_vector();
  synchronous.params[0].values.assign(values.begin(), values.begin() + 1000);
  synchronous.params[1].values.assign(values.begin() + 1000, values.end());

  CheckpointWriter in_step((dir.path() / "sync").string(), 1), background((dir.path() / "async").string(), 1);
  const std::string sync_file = in_step.write(synchronous);
  DeviceSnapshot& snapshot = background.device_snapshot();
  snapshot.take({params});
  background.write_in_background(checkpoint, [&snapshot](io::Checkpoint& c) {
    c.params[0].values = snapshot.values(0, 0, 1000);
    c.params[1].values = snapshot.values(0, 1000, 3096);
  });
  snapshot.guard_overwrites();
  Tensor overwritten = params;
  kernels::copy(on_device(Tensor::from(random_bits(4096, 7), params.shape())), overwritten);
  background.wait();
  EXPECT_EQ(background.device_snapshot_in_use(), &snapshot);

  const io::Checkpoint a = io::read_checkpoint(sync_file), b = io::read_checkpoint(background.path(4));
  ASSERT_EQ(a.params.size(), 2u);
  ASSERT_EQ(b.params.size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_TRUE(same_bits(a.params[i].values, b.params[i].values)) << a.params[i].name;
  EXPECT_EQ(io::checkpoint_crc32(a), io::checkpoint_crc32(b));
}

INSTANTIATE_TEST_SUITE_P(Devices, DeviceSnapshotTest, ::testing::ValuesIn(mirrored::testing::kTestDevices),
                         mirrored::testing::device_name);

}  // namespace
}  // namespace mirrored::checkpoint
