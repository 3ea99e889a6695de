// core/file_replacement.h: a file is replaced whole or not at all, never through a symlink,
// and the clean-up of abandoned temporaries leaves everything else alone.
#include "mirrored/core/file_replacement.h"

#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "error_matchers.h"
#include "mirrored/checkpoint/run_directory.h"
#include "mirrored/config/config.h"
#include "mirrored/core/error.h"
#include "mirrored/io/checkpoint_file.h"
#include "mirrored/io/hdf5.h"
#include "temp_dir.h"

namespace {

using namespace mirrored;
using mirrored::testing::expect_mentions;
using mirrored::testing::message_of;
using mirrored::testing::TempDir;
namespace fs = std::filesystem;

std::string contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::vector<std::string> names_in(const TempDir& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir.path())) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Runs `body` in a child process and returns its exit status (a test's failures there are
// printed by the child; its status says whether any happened).
template <typename Body>
int in_child(Body body) {
  const pid_t child = fork();
  if (child == 0) {
    body();
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(FileReplacement, ReplacesTheTargetWholeAndKeepsItsMode) {
  TempDir dir;
  const std::string target = dir.file("metrics.jsonl");
  write(target, "old\n");
  chmod(target.c_str(), 0640);
  replace_file(target, "new content\n");
  EXPECT_EQ(contents(target), "new content\n");
  struct stat info {};
  ASSERT_EQ(stat(target.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0640u) << "a rewrite keeps the file's permissions";
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"metrics.jsonl"}) << "no temporary is left";
}

TEST(FileReplacement, AnUncommittedWriteLeavesTheTargetAndNoTemporary) {
  TempDir dir;
  const std::string target = dir.file("config.ini");
  write(target, "old\n");
  {
    FileReplacement file(target);
    file.write("half of the ne");
    EXPECT_TRUE(fs::exists(file.temporary()));
    EXPECT_TRUE(is_replacement_temporary(fs::path(file.temporary()).filename().string(), "config.ini"));
  }  // an error on the way: destroyed without commit()
  EXPECT_EQ(contents(target), "old\n");
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"config.ini"});
}

// The old fixed name "<target>.tmp", planted as a symlink to a victim: nothing follows it.
TEST(FileReplacement, APlantedSymlinkIsNeitherFollowedNorTruncated) {
  TempDir dir;
  const std::string victim = dir.file("victim"), target = dir.file("model.safetensors");
  write(victim, "precious\n");
  fs::create_symlink(victim, target + ".tmp");
  replace_file(target, "exported\n");
  EXPECT_EQ(contents(victim), "precious\n");
  EXPECT_FALSE(fs::is_symlink(target));
  EXPECT_EQ(contents(target), "exported\n");
  // A symlink as the target itself is replaced (the name now holds the file), not written through.
  fs::create_symlink(victim, dir.file("link"));
  replace_file(dir.file("link"), "mine\n");
  EXPECT_EQ(contents(victim), "precious\n");
  EXPECT_FALSE(fs::is_symlink(dir.file("link")));
}

// A full disk, as RLIMIT_FSIZE makes one for this process (EFBIG where ENOSPC would come):
// the write stops with Error(kWriteFailed) naming the file, and the old file is whole.
TEST(FileReplacement, AFailedWriteStopsWithExitCode10AndLeavesTheOldFileWhole) {
  TempDir dir;
  const std::string target = dir.file("metrics.jsonl");
  const std::string old(4096, 'o');
  write(target, old);
  EXPECT_EQ(in_child([&] {
              std::signal(SIGXFSZ, SIG_IGN);
              const rlimit limit{1024, 1024};
              setrlimit(RLIMIT_FSIZE, &limit);
              try {
                replace_file(target, std::string(8192, 'n'));
                ADD_FAILURE() << "a write past the limit succeeded";
              } catch (const Error& e) {
                EXPECT_EQ(e.code(), ExitCode::kWriteFailed);
                expect_mentions(e.what(), {target, "File too large", "unchanged"});
              }
            }),
            0);
  EXPECT_EQ(contents(target), old);
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"metrics.jsonl"});
}

// The resume's cut-back of metrics.jsonl on a full disk (RLIMIT_FSIZE standing in for one):
// the run stops with exit code 10 and every record is kept (it once lost them and went on).
TEST(FileReplacement, TheResumeCutBackOfMetricsKeepsEveryRecordWhenTheDiskIsFull) {
  TempDir dir;
  std::string records;
  for (int step = 1; step <= 200; ++step)
    records += "{\"kind\": \"train\", \"step\": " + std::to_string(step) + ", \"loss\": 0.123456789}\n";
  write(dir.file("metrics.jsonl"), records);
  config::TrainConfig config;
  config.out = dir.path().string();
  EXPECT_EQ(in_child([&] {
              std::signal(SIGXFSZ, SIG_IGN);
              const rlimit limit{4096, 4096};  // config.ini fits, the 100 kept records do not
              setrlimit(RLIMIT_FSIZE, &limit);
              checkpoint::RunDirectory run(config, /*is_chief=*/true);
              try {
                run.open_metrics(/*resumed_step=*/100);
                ADD_FAILURE() << "the cut-back succeeded past the limit";
              } catch (const Error& e) {
                EXPECT_EQ(e.code(), ExitCode::kWriteFailed);
                expect_mentions(e.what(), {dir.file("metrics.jsonl"), "unchanged"});
              }
            }),
            0);
  EXPECT_EQ(contents(dir.file("metrics.jsonl")), records);
  // With room, the same resume cuts it back to step 100.
  checkpoint::RunDirectory run(config, true);
  run.open_metrics(100);
  EXPECT_EQ(contents(dir.file("metrics.jsonl")), records.substr(0, records.find("{\"kind\": \"train\", \"step\": 101,")));
}

TEST(FileReplacement, HDF5FilesAreReplacedWholeOrNotAtAll) {
  TempDir dir;
  const std::string target = dir.file("final.h5");
  io::write_hdf5_file(target, [](io::H5File& file) { file.write_attribute("step", int64_t{1}); });
  EXPECT_EQ(io::H5File(target, io::H5File::Access::kRead).read_int_attribute("step"), 1);
  const std::string message = message_of<Error>([&] {
    io::write_hdf5_file(target, [](io::H5File& file) {
      file.write_attribute("step", int64_t{2});
      throw Error(ExitCode::kFailure, "disk gone");
    });
  });
  expect_mentions(message, {target, "disk gone", "unchanged"});
  EXPECT_EQ(io::H5File(target, io::H5File::Access::kRead).read_int_attribute("step"), 1);
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"final.h5"});
}

TEST(FileReplacement, TheCleanUpRemovesOnlyAbandonedTemporariesOfItsOwnTargets) {
  TempDir dir;
  // Abandoned: a writer that died mid-write (its lock went with it).
  std::string abandoned;
  {
    int pipe_fds[2];
    ASSERT_EQ(pipe(pipe_fds), 0);
    const pid_t child = fork();
    if (child == 0) {
      auto* file = new FileReplacement(dir.file("ckpt-000000004.h5"));  // never destroyed: as a SIGKILL leaves it
      file->write("partial");
      const std::string name = file->temporary();
      (void)!::write(pipe_fds[1], name.data(), name.size());
      _exit(0);
    }
    close(pipe_fds[1]);
    char name[4096] = {};
    ASSERT_GT(read(pipe_fds[0], name, sizeof name), 0);
    close(pipe_fds[0]);
    waitpid(child, nullptr, 0);
    abandoned = name;
  }
  ASSERT_TRUE(fs::exists(abandoned));
  // Alive: a write in progress in this process.
  FileReplacement alive(dir.file("ckpt-000000008.h5"));
  alive.write("in progress");
  // Not ours: other names, a symlink under our pattern.
  write(dir.file("other.h5.tmp.1"), "another writer's");
  write(dir.file("notes.txt.tmp.abcdef"), "another target's");
  write(dir.file("final.h5.tmp.abcdef"), "not a checkpoint's");
  fs::create_symlink(dir.file("other.h5.tmp.1"), dir.file("ckpt-000000012.h5.tmp.abcdef"));
  write(dir.file("ckpt-000000002.h5.tmp.4242"), "an earlier version's leftover");
  EXPECT_EQ(io::remove_abandoned_checkpoint_temporaries(dir.path().string()), 2u);
  EXPECT_FALSE(fs::exists(dir.file("ckpt-000000002.h5.tmp.4242")));
  EXPECT_FALSE(fs::exists(abandoned));
  EXPECT_TRUE(fs::exists(alive.temporary()));
  EXPECT_TRUE(fs::exists(dir.file("other.h5.tmp.1")));
  EXPECT_TRUE(fs::exists(dir.file("notes.txt.tmp.abcdef")));
  EXPECT_TRUE(fs::exists(dir.file("final.h5.tmp.abcdef")));
  EXPECT_TRUE(fs::is_symlink(dir.file("ckpt-000000012.h5.tmp.abcdef")));
  alive.commit();
  EXPECT_EQ(contents(dir.file("ckpt-000000008.h5")), "in progress");
}

TEST(FileReplacement, TemporaryNamesAreRecognisedExactly) {
  EXPECT_TRUE(is_replacement_temporary("a.h5.tmp.Ab3dE9", "a.h5"));
  EXPECT_FALSE(is_replacement_temporary("a.h5.tmp.Ab3dE", "a.h5"));
  EXPECT_FALSE(is_replacement_temporary("a.h5.tmp.Ab3dE9x", "a.h5"));
  EXPECT_FALSE(is_replacement_temporary("a.h5.tmp.Ab3d-9", "a.h5"));
  EXPECT_FALSE(is_replacement_temporary("b.h5.tmp.Ab3dE9", "a.h5"));
  EXPECT_FALSE(is_replacement_temporary("a.h5.tmp.12345", "a.h5"));  // the old writer's pid suffix
}

}  // namespace
