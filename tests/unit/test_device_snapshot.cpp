// A background checkpoint's snapshot (checkpoint/device_snapshot.h): on a GPU the copies run
// on a side stream into page-locked memory, yet the values equal the synchronous copy's bit
// for bit, also when the tensors are overwritten on the compute stream right after
// guard_overwrites() (the next update); buffers are reused by the next snapshot; and a
// checkpoint completed from a snapshot on the writer thread is the file a synchronous write
// makes. Run on the CPU and on cuda:0 (skipped without a GPU). On the CPU the snapshot holds
// the tensors instead of copying them in the step: the writer reads them in place, the
// guard copies what the writer has not released, and the values are those of take() either
// way.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "devices.h"
#include "mirrored/checkpoint/checkpoint_writer.h"
#include "mirrored/checkpoint/device_snapshot.h"
#include "mirrored/io/checkpoint_file.h"
#include "mirrored/io/crc32_ieee.h"
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
  // memcmp takes no null pointer, which an empty vector's data() may be.
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
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

TEST_P(DeviceSnapshotTest, ValuesCopiedWithTheirCrcCarryTheCrcOfWhatWasCopied) {
  const std::vector<float> values = random_bits(20000, 12);
  const Tensor tensor = on_device(Tensor::from(values, Shape{20000}));
  DeviceSnapshot snapshot;
  snapshot.take({tensor});
  // Across the copy's 4096-float pieces: none, one short, exact, one over, several.
  for (int64_t count : {0, 1, 4095, 4096, 4097, 12289, 20000 - 3}) {
    std::vector<float> into(5, 9.0f);  // stale values and size: replaced
    std::optional<uint32_t> crc;
    snapshot.copy_values(0, 3, count, into, &crc);
    ASSERT_TRUE(crc.has_value());
    const std::vector<float> expected(values.begin() + 3, values.begin() + 3 + count);
    EXPECT_TRUE(same_bits(into, expected)) << count;
    EXPECT_EQ(*crc, io::crc32_ieee(expected.data(), expected.size() * sizeof(float))) << count;
  }
  snapshot.guard_overwrites();
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

TEST(CpuSnapshot, TakesNoCopyInTheStepAndTheWriterReadsTheTensorsInPlaceUntilItReleasesThem) {
  Tensor params = Tensor::from(random_bits(4096, 8), Shape{4096});
  const std::vector<float> before = params.to_vector();
  DeviceSnapshot snapshot;
  snapshot.take({params});
  // Held, not copied: a change made behind the snapshot's back (which the step never makes
  // before guard_overwrites) shows through.
  params.data<float>()[5] = 1.5f;
  EXPECT_EQ(snapshot.values(0, 5, 1), std::vector<float>{1.5f});
  params.data<float>()[5] = before[5];
  std::vector<float> read;
  std::thread writer([&] {
    snapshot.copy_values(0, read);
    snapshot.release();
  });
  writer.join();
  EXPECT_TRUE(same_bits(read, before));
  // Released: the update needs no copy, and the snapshot no longer reads the tensor.
  snapshot.guard_overwrites();
  EXPECT_THROW(snapshot.values(0), Error);
  // The next snapshot holds values again.
  snapshot.take({params});
  EXPECT_TRUE(same_bits(snapshot.values(0), before));
}

TEST(CpuSnapshot, TheUpdateCopiesWhatTheWriterHasNotReadAndTheWriterThenReadsThatCopy) {
  Tensor params = Tensor::from(random_bits(1 << 16, 9), Shape{1 << 16});
  const std::vector<float> before = params.to_vector();
  DeviceSnapshot snapshot;
  snapshot.take({params});
  // The writer read the first half only when the update came.
  const std::vector<float> first = snapshot.values(0, 0, 1 << 15);
  snapshot.guard_overwrites();
  const std::vector<float> overwrite = random_bits(1 << 16, 10);
  std::memcpy(params.data<float>(), overwrite.data(), overwrite.size() * sizeof(float));
  const std::vector<float> second = snapshot.values(0, 1 << 15, 1 << 15);
  snapshot.release();  // nothing held any more: the copy stays readable
  std::vector<float> whole = first;
  whole.insert(whole.end(), second.begin(), second.end());
  EXPECT_TRUE(same_bits(whole, before));
  EXPECT_TRUE(same_bits(snapshot.values(0), before));
}

TEST(CpuSnapshot, AWriterReadingWhileTheUpdateGuardsAndOverwritesAlwaysSeesTheValuesOfTake) {
  // The race the step runs every checkpoint: the writer thread's reads against the main
  // thread's guard and update, in either order, for many rounds (TSan checks the locking).
  Tensor params = Tensor::from(random_bits(1 << 14, 11), Shape{1 << 14});
  DeviceSnapshot snapshot;
  for (uint32_t round = 0; round < 50; ++round) {
    const std::vector<float> taken = params.to_vector();
    snapshot.take({params});
    std::vector<float> read;
    std::thread writer([&] {
      for (int64_t at = 0; at < params.numel(); at += 1024) {
        std::vector<float> piece;
        snapshot.copy_values(0, at, 1024, piece);
        read.insert(read.end(), piece.begin(), piece.end());
      }
      snapshot.release();
    });
    snapshot.guard_overwrites();
    const std::vector<float> next = random_bits(static_cast<size_t>(params.numel()), 100 + round);
    std::memcpy(params.data<float>(), next.data(), next.size() * sizeof(float));
    writer.join();
    ASSERT_TRUE(same_bits(read, taken)) << "round " << round;
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, DeviceSnapshotTest, ::testing::ValuesIn(mirrored::testing::kTestDevices),
                         mirrored::testing::device_name);

}  // namespace
}  // namespace mirrored::checkpoint
