// Which folder a run goes to (config::resolve_run_directory) and what resume = never clears
// (checkpoint::RunDirectory::clear_earlier_run).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

#include "mirrored/checkpoint/run_directory.h"
#include "mirrored/config/config.h"
#include "temp_dir.h"

using namespace mirrored;
using config::parse_train_config;
using config::run_folder_name;
namespace fs = std::filesystem;

namespace {
// parse_train_config reads SLURM_JOB_ID; each test sets it as it needs and puts it back.
class SlurmJobId {
 public:
  explicit SlurmJobId(const char* value) {
    if (const char* old = std::getenv("SLURM_JOB_ID")) old_ = old, had_ = true;
    value ? setenv("SLURM_JOB_ID", value, 1) : unsetenv("SLURM_JOB_ID");
  }
  ~SlurmJobId() { had_ ? setenv("SLURM_JOB_ID", old_.c_str(), 1) : unsetenv("SLURM_JOB_ID"); }

 private:
  std::string old_;
  bool had_ = false;
};

void touch(const fs::path& path) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << "x";
}
}  // namespace

TEST(RunDirectory, OutFromTheConfigurationIsAParentWithAFolderPerConfiguration) {
  SlurmJobId none(nullptr);
  const auto first = parse_train_config({"--lr", "0.1"});
  EXPECT_EQ(first.out_parent, "runs/default");
  EXPECT_TRUE(std::regex_match(first.out, std::regex("runs/default/run-[0-9a-f]{8}"))) << first.out;
  // The same configuration finds the same folder (and resumes there), whatever the
  // operational keys say; a result-changing key gives a new folder beside it.
  EXPECT_EQ(parse_train_config({"--lr", "0.1", "--epochs", "9", "--max_steps", "5", "--threads", "3",
                                "--resume", "never", "--log_every", "1"})
                .out,
            first.out);
  const auto other_lr = parse_train_config({"--lr", "0.2"});
  const auto other_seed = parse_train_config({"--lr", "0.1", "--seed", "8"});
  EXPECT_NE(other_lr.out, first.out);
  EXPECT_NE(other_seed.out, first.out);
  EXPECT_NE(other_seed.out, other_lr.out);
  EXPECT_EQ(fs::path(other_lr.out).parent_path(), fs::path("runs/default"));
}

TEST(RunDirectory, OutOnTheCommandLineIsTheRunDirectoryItself) {
  SlurmJobId job("4242");
  const auto config = parse_train_config({"--lr", "0.1", "--out", "runs/mine"});
  EXPECT_EQ(config.out, "runs/mine");
  EXPECT_TRUE(config.out_parent.empty());
  EXPECT_NE(config::to_ini(config).find("out = runs/mine\n"), std::string::npos);
}

TEST(RunDirectory, ASlurmJobFindsItsOwnFolderWhenRequeued) {
  SlurmJobId job("4242");
  const auto config = parse_train_config({"--lr", "0.1"});
  EXPECT_EQ(config.out, (fs::path("runs/default") / "slurm-4242").string());
  // A requeued job has the same id: the same folder, whatever a key says.
  EXPECT_EQ(parse_train_config({"--lr", "0.3"}).out, config.out);
  EXPECT_EQ(run_folder_name(config, "77_3"), "slurm-77_3");  // array job ids as Slurm prints them
  // A value that is not a job id never becomes a path: the configuration's folder instead.
  for (const char* hostile : {"../../etc", "1/2", "", "4242 x"})
    EXPECT_EQ(run_folder_name(config, hostile), run_folder_name(config, nullptr)) << hostile;
}

TEST(RunDirectory, ItsConfigIniReadBackFindsTheSameRun) {
  SlurmJobId none(nullptr);
  mirrored::testing::TempDir dir;
  const std::string ini = dir.file("a.ini");
  std::ofstream(ini) << "out = " << dir.file("runs") << "\n";
  const auto config = parse_train_config({"--lr", "0.1", "--config", ini});
  EXPECT_EQ(fs::path(config.out).parent_path(), dir.path() / "runs");
  const std::string stored = dir.file("config.ini");
  std::ofstream(stored) << config::to_ini(config);
  EXPECT_EQ(parse_train_config({"--config", stored}).out, config.out);
}

TEST(RunDirectory, ResumeNeverClearsTheEarlierRunAndNothingElse) {
  SlurmJobId none(nullptr);
  mirrored::testing::TempDir dir;
  auto config = parse_train_config({"--out", dir.file("run")});
  const fs::path run = config.out;
  for (const char* name : {"checkpoints/ckpt-000000010.h5", "checkpoints/ckpt-000000020.h5",
                           "tensorboard/events.out.tfevents.1.host", "tensorboard/events.out.tfevents.2.host",
                           "trace/rank-0.jsonl", "metrics.jsonl", "final.h5", "notes.txt", "tensorboard/mine.txt"})
    touch(run / name);
  // A link named like a checkpoint is not followed: its target stays.
  touch(dir.path() / "precious.h5");
  fs::create_symlink(dir.path() / "precious.h5", run / "checkpoints" / "ckpt-000000030.h5");

  checkpoint::RunDirectory directory(config, /*is_chief=*/true);
  EXPECT_EQ(directory.clear_earlier_run(),
            "2 checkpoint(s), 2 TensorBoard event file(s), 1 flight-recorder dump(s), metrics.jsonl, final.h5");
  for (const char* gone : {"checkpoints/ckpt-000000010.h5", "tensorboard/events.out.tfevents.1.host",
                           "tensorboard/events.out.tfevents.2.host", "trace/rank-0.jsonl", "metrics.jsonl",
                           "final.h5"})
    EXPECT_FALSE(fs::exists(run / gone)) << gone;
  for (const char* kept : {"notes.txt", "tensorboard/mine.txt"}) EXPECT_TRUE(fs::exists(run / kept)) << kept;
  EXPECT_TRUE(fs::exists(dir.path() / "precious.h5"));
  EXPECT_EQ(directory.clear_earlier_run(), "") << "nothing left to clear";
  EXPECT_EQ(checkpoint::RunDirectory(config, /*is_chief=*/false).clear_earlier_run(), "");
}
