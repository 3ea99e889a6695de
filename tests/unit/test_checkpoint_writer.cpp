// The one checkpoint writer (checkpoint/checkpoint_writer.h): it creates the directory,
// writes atomically, keeps the newest `keep` of its own files and removes nothing else; a
// write that fails leaves the previous file whole and says why. Background writes
// (checkpoint.async) write the same files, one at a time, and report their failures on the
// caller's thread; a process killed mid-write leaves the previous checkpoint.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>

#include <hdf5.h>

#include "error_matchers.h"
#include "mirrored/checkpoint/checkpoint_store.h"
#include "mirrored/checkpoint/checkpoint_writer.h"
#include "mirrored/config/config.h"
#include "mirrored/core/error.h"
#include "mirrored/io/checkpoint_file.h"
#include "temp_dir.h"

namespace mirrored::checkpoint {
namespace {

namespace fs = std::filesystem;
using mirrored::testing::expect_mentions;
using mirrored::testing::TempDir;

// A small checkpoint of `step` whose every value is `value`.
io::Checkpoint checkpoint_of(int64_t step, float value, size_t floats = 6) {
  io::Checkpoint c;
  c.step = step;
  c.steps_per_epoch = 10;
  c.epoch = step / 10;
  c.step_in_epoch = step % 10;
  c.optimizer = "sgd";
  c.params.push_back({"w", {static_cast<int64_t>(floats)}, std::vector<float>(floats, value)});
  return c;
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// While it lives, a file can grow to `bytes` at most: a write past it fails with EFBIG (the
// signal that would end the process is ignored), as it would on a full disk.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    previous_signal_ = std::signal(SIGXFSZ, SIG_IGN);
    getrlimit(RLIMIT_FSIZE, &previous_);
    rlimit limit = previous_;
    limit.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &previous_);
    std::signal(SIGXFSZ, previous_signal_);
  }

 private:
  rlimit previous_{};
  void (*previous_signal_)(int) = SIG_DFL;
};

TEST(CheckpointWriter, CreatesTheDirectoryAndWritesTheCheckpointOfItsStep) {
  TempDir dir;
  CheckpointWriter writer(dir.file("run/checkpoints"), 3);
  const std::string path = writer.write(checkpoint_of(20, 1.5f));
  EXPECT_EQ(path, dir.file("run/checkpoints/ckpt-000000020.h5"));
  EXPECT_EQ(writer.path(20), path);
  const io::Checkpoint back = io::read_checkpoint(path);
  EXPECT_EQ(back.step, 20);
  EXPECT_EQ(back.params.at(0).values, std::vector<float>(6, 1.5f));
  EXPECT_EQ(names_in(dir.path() / "run/checkpoints"), std::vector<std::string>{"ckpt-000000020.h5"});
}

TEST(CheckpointWriter, KeepsTheNewestOfItsOwnFilesAndRemovesNothingElse) {
  TempDir dir;
  const fs::path checkpoints = dir.path() / "checkpoints";
  fs::create_directories(checkpoints / "ckpt-000000001.h5");  // a directory with a checkpoint's name
  std::ofstream(checkpoints / "notes.txt") << "mine";
  std::ofstream(checkpoints / "ckpt-000000002.h5.tmp.999") << "another writer's temporary";
  std::ofstream(checkpoints / "ckpt-12.h5x") << "not a checkpoint name";
  std::ofstream(dir.path() / "elsewhere.h5") << "a file outside";
  // A symbolic link with a newer checkpoint's name: neither counted among the kept nor removed.
  fs::create_symlink(dir.path() / "elsewhere.h5", checkpoints / "ckpt-000000900.h5");

  CheckpointWriter writer(checkpoints.string(), 2);
  for (int64_t step : {10, 20, 30, 40}) writer.write(checkpoint_of(step, static_cast<float>(step)));
  EXPECT_EQ(names_in(checkpoints),
            (std::vector<std::string>{"ckpt-000000001.h5", "ckpt-000000002.h5.tmp.999", "ckpt-000000030.h5",
                                      "ckpt-000000040.h5", "ckpt-000000900.h5", "ckpt-12.h5x", "notes.txt"}));
  EXPECT_TRUE(fs::exists(dir.path() / "elsewhere.h5"));
  EXPECT_EQ(io::read_checkpoint(writer.path(30)).params.at(0).values, std::vector<float>(6, 30.0f));
}

TEST(CheckpointWriter, KeepsAsManyAsConfigured) {
  TempDir dir;
  config::TrainConfig config;
  config.out = dir.file("run");
  config.checkpoint_keep = 1;
  CheckpointWriter writer(config);
  EXPECT_EQ(writer.dir(), checkpoint_dir(config));
  for (int64_t step : {5, 6, 7}) writer.write(checkpoint_of(step, 0.5f));
  EXPECT_EQ(list_checkpoints(writer.dir()), std::vector<std::string>{writer.path(7)});
}

TEST(CheckpointWriter, AFailedWriteLeavesThePreviousFileAndSaysWhy) {
  TempDir dir;
  CheckpointWriter writer(dir.file("checkpoints"), 3);
  const std::string path = writer.write(checkpoint_of(10, 1.0f));
  // The same step again, far larger than the file system lets a file grow. In a child
  // process: HDF5 (1.10) keeps a file whose close failed in its tables and crashes closing
  // it again when the process exits, which would take this test binary with it.
  EXPECT_EXIT(
      {
        const FileSizeLimit limit(64 * 1024);
        try {
          writer.write(checkpoint_of(10, 2.0f, 1 << 20));
          std::fprintf(stderr, "a write past the file size limit succeeded\n");
        } catch (const Error& e) {
          std::fprintf(stderr, "code %d: %s\n", static_cast<int>(e.code()), e.what());
        }
        std::fflush(stderr);
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0),
      // The exit code, which file, and the system's reason (EFBIG).
      str_cat("code ", static_cast<int>(ExitCode::kCheckpoint), ": cannot write checkpoint '", path,
              "'.*File too large"));
  // The file that was there is whole and unchanged, and nothing else was left behind.
  const io::Checkpoint back = io::read_checkpoint(path);
  EXPECT_EQ(back.params.at(0).values, std::vector<float>(6, 1.0f));
  EXPECT_EQ(names_in(dir.path() / "checkpoints"), std::vector<std::string>{"ckpt-000000010.h5"});
}

TEST(CheckpointWriter, ADirectoryThatCannotBeCreatedIsACheckpointError) {
  TempDir dir;
  std::ofstream(dir.file("file")) << "a file where the directory should go";
  CheckpointWriter writer(dir.file("file/checkpoints"), 3);
  try {
    writer.write(checkpoint_of(1, 1.0f));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kCheckpoint);
    expect_mentions(e.what(), {"cannot create checkpoint directory", dir.file("file/checkpoints")});
  }
}


// A checkpoint of `step` with every field set and `floats` random values (bit patterns a
// conversion or a stale buffer would change).
io::Checkpoint full_checkpoint_of(int64_t step, size_t floats) {
  io::Checkpoint c = checkpoint_of(step, 0.0f, floats);
  std::mt19937 random(static_cast<uint32_t>(step));
  std::normal_distribution<float> normal;
  for (float& v : c.params[0].values) v = normal(random);
  c.params.push_back({"b", {3}, {1.0f, -0.0f, 1e-30f}});
  c.buffers.push_back({"bn.mean", {2}, {normal(random), normal(random)}});
  c.optimizer = "adam";
  c.optimizer_steps = step;
  c.optimizer_state.push_back({"m", {static_cast<int64_t>(floats)}, c.params[0].values});
  c.world_size = 4;
  c.config = "lr = 0.1\n";
  return c;
}

void expect_same_tensors(const std::vector<io::CheckpointTensor>& a, const std::vector<io::CheckpointTensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].shape, b[i].shape);
    ASSERT_EQ(a[i].values.size(), b[i].values.size()) << a[i].name;
    EXPECT_EQ(std::memcmp(a[i].values.data(), b[i].values.data(), a[i].values.size() * sizeof(float)), 0)
        << a[i].name << " differs";
  }
}

// Every dataset and attribute of the two files, compared bit for bit.
void expect_same_files(const std::string& a_path, const std::string& b_path) {
  const io::Checkpoint a = io::read_checkpoint(a_path), b = io::read_checkpoint(b_path);
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.step_in_epoch, b.step_in_epoch);
  EXPECT_EQ(a.steps_per_epoch, b.steps_per_epoch);
  EXPECT_EQ(a.world_size, b.world_size);
  EXPECT_EQ(a.optimizer, b.optimizer);
  EXPECT_EQ(a.optimizer_steps, b.optimizer_steps);
  EXPECT_EQ(a.config, b.config);
  expect_same_tensors(a.params, b.params);
  expect_same_tensors(a.buffers, b.buffers);
  expect_same_tensors(a.optimizer_state, b.optimizer_state);
}

TEST(CheckpointWriterInBackground, WritesTheSameFileAsTheSynchronousWrite) {
  TempDir dir;
  const io::Checkpoint checkpoint = full_checkpoint_of(30, 100000);
  CheckpointWriter in_step(dir.file("sync"), 3), in_background(dir.file("async"), 3);
  const std::string sync_path = in_step.write(checkpoint);
  in_background.write_in_background(checkpoint);
  in_background.wait();
  EXPECT_FALSE(in_background.writing());
  expect_same_files(sync_path, in_background.path(30));
  // And both hold what was handed over.
  expect_same_tensors(io::read_checkpoint(sync_path).params, checkpoint.params);
}

// The next snapshot refills the buffers of the checkpoint last written (no fresh memory,
// no page faults in the step), and the file it makes is the one fresh buffers make.
TEST(CheckpointWriterInBackground, HandsBackTheBuffersOfTheCheckpointItWrote) {
  TempDir dir;
  CheckpointWriter writer(dir.file("reused"), 3), fresh(dir.file("fresh"), 3);
  EXPECT_TRUE(writer.take_spent().params.empty());  // nothing written yet
  io::Checkpoint first = full_checkpoint_of(30, 100000);
  const float* params_buffer = first.params[0].values.data();
  const float* state_buffer = first.optimizer_state[0].values.data();
  writer.write_in_background(std::move(first));
  io::Checkpoint spent = writer.take_spent();  // waits for the write
  EXPECT_FALSE(writer.writing());
  ASSERT_EQ(spent.params.size(), 2u);
  EXPECT_EQ(spent.params[0].values.data(), params_buffer);
  EXPECT_EQ(spent.optimizer_state.at(0).values.data(), state_buffer);
  EXPECT_TRUE(writer.take_spent().params.empty());  // handed back once

  // The next checkpoint's values copied into those buffers, as capture_checkpoint does.
  const io::Checkpoint next = full_checkpoint_of(31, 100000);
  using Group = std::vector<io::CheckpointTensor> io::Checkpoint::*;
  for (Group group : {&io::Checkpoint::params, &io::Checkpoint::buffers, &io::Checkpoint::optimizer_state})
    for (size_t i = 0; i < (next.*group).size(); ++i)
      (spent.*group)[i].values.assign((next.*group)[i].values.begin(), (next.*group)[i].values.end());
  spent.step = next.step;
  spent.epoch = next.epoch;
  spent.step_in_epoch = next.step_in_epoch;
  spent.optimizer_steps = next.optimizer_steps;
  EXPECT_EQ(spent.params[0].values.data(), params_buffer);
  EXPECT_EQ(spent.optimizer_state[0].values.data(), state_buffer);
  writer.write_in_background(std::move(spent));
  writer.wait();
  expect_same_files(writer.path(31), fresh.write(next));

  // A synchronous write's checkpoint, handed over by its caller, comes back the same way.
  io::Checkpoint written = full_checkpoint_of(32, 1000);
  const float* written_buffer = written.params[0].values.data();
  writer.write(written);
  writer.keep_spent(std::move(written));
  EXPECT_EQ(writer.take_spent().params.at(0).values.data(), written_buffer);
}

TEST(CheckpointWriterInBackground, OneWriteAtATimeInOrderAndPruned) {
  TempDir dir;
  CheckpointWriter writer(dir.file("checkpoints"), 2);
  for (int64_t step : {1, 2, 3}) writer.write_in_background(checkpoint_of(step, static_cast<float>(step), 50000));
  // A synchronous write waits for the one in flight, so the order on disk is the order asked.
  writer.write(checkpoint_of(4, 4.0f));
  EXPECT_FALSE(writer.writing());
  EXPECT_EQ(list_checkpoints(writer.dir()), (std::vector<std::string>{writer.path(4), writer.path(3)}));
  EXPECT_EQ(io::read_checkpoint(writer.path(3)).params.at(0).values, std::vector<float>(50000, 3.0f));
}

TEST(CheckpointWriterInBackground, AFailureIsReportedOnTheCallingThreadOnce) {
  TempDir dir;
  std::ofstream(dir.file("file")) << "a file where the directory should go";
  CheckpointWriter writer(dir.file("file/checkpoints"), 3);
  writer.write_in_background(checkpoint_of(1, 1.0f));
  try {
    writer.wait();
    FAIL() << "expected the background write's error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kCheckpoint);
    expect_mentions(e.what(), {"cannot create checkpoint directory", dir.file("file/checkpoints")});
  }
  EXPECT_NO_THROW(writer.wait());  // reported once
  // The next write reports the failure of the one before it.
  writer.write_in_background(checkpoint_of(2, 1.0f));
  EXPECT_THROW(writer.write_in_background(checkpoint_of(3, 1.0f)), Error);
  // The destructor, which may not throw, lets the last one finish and only logs its failure.
}

TEST(CheckpointWriterInBackground, OnByDefaultWhereHdf5IsThreadSafeAndOffWhenAsked) {
  hbool_t thread_safe = 0;
  ASSERT_GE(H5is_library_threadsafe(&thread_safe), 0);
  config::TrainConfig config;
  EXPECT_TRUE(config.checkpoint_async);
  EXPECT_EQ(CheckpointWriter::background_writes(config), thread_safe != 0);
  config = config::parse_train_config({"--checkpoint.async", "false"});
  EXPECT_FALSE(config.checkpoint_async);
  EXPECT_FALSE(CheckpointWriter::background_writes(config));
}

// The writer's process dies while a background write is in flight (a temporary exists):
// the previous checkpoint is whole, no partial file has a checkpoint's name, and the
// temporary is recognised as abandoned.
TEST(CheckpointWriterInBackground, AProcessKilledMidWriteLeavesThePreviousCheckpoint) {
  TempDir dir;
  const std::string checkpoints = dir.file("checkpoints");
  const io::Checkpoint previous = full_checkpoint_of(10, 1000);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    CheckpointWriter writer(checkpoints, 3);
    writer.write(previous);
    // 48 MiB: the write takes long enough for the parent to see its temporary.
    writer.write_in_background(checkpoint_of(20, 2.0f, 12u << 20));
    writer.wait();
    std::_Exit(0);
  }
  const auto is_temporary = [](const std::string& name) { return name.find(".tmp.") != std::string::npos; };
  bool seen = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!seen && std::chrono::steady_clock::now() < deadline) {
    if (fs::exists(checkpoints) && fs::exists(checkpoints + "/ckpt-000000010.h5")) {
      std::error_code error;
      for (const auto& entry : fs::directory_iterator(checkpoints, error))
        if (is_temporary(entry.path().filename().string()) &&
            entry.path().filename().string().rfind("ckpt-000000020.h5", 0) == 0)
          seen = true;
    }
    if (!seen) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(seen) << "the background write's temporary never appeared";
  ASSERT_TRUE(WIFSIGNALED(status)) << "the write finished before it could be interrupted";
  expect_same_tensors(io::read_checkpoint(checkpoints + "/ckpt-000000010.h5").params, previous.params);
  // Either the kill came before the rename (no ckpt-20) or after it (a whole ckpt-20).
  for (const std::string& path : list_checkpoints(checkpoints)) EXPECT_NO_THROW(io::read_checkpoint(path)) << path;
  EXPECT_EQ(list_checkpoints(checkpoints).front(),
            fs::exists(checkpoints + "/ckpt-000000020.h5") ? checkpoints + "/ckpt-000000020.h5"
                                                           : checkpoints + "/ckpt-000000010.h5");
  io::remove_abandoned_checkpoint_temporaries(checkpoints);
  for (const std::string& name : names_in(checkpoints)) EXPECT_FALSE(is_temporary(name)) << name;
}

}  // namespace
}  // namespace mirrored::checkpoint
