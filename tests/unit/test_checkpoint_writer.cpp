// The one checkpoint writer (checkpoint/checkpoint_writer.h): it creates the directory,
// writes atomically, keeps the newest `keep` of its own files and removes nothing else; a
// write that fails leaves the previous file whole and says why.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "error_matchers.h"
#include "mirrored/checkpoint/checkpoint_store.h"
#include "mirrored/checkpoint/checkpoint_writer.h"
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

}  // namespace
}  // namespace mirrored::checkpoint
