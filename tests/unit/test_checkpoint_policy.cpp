// Checkpoint policy (checkpoint/checkpoint_store.h, checkpoint/resume_policy.h): when a run
// saves, and which checkpoint it resumes from, decided from the configuration and the files
// alone, without a Trainer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "error_matchers.h"
#include "mirrored/checkpoint/checkpoint_store.h"
#include "mirrored/checkpoint/checkpoint_writer.h"
#include "mirrored/checkpoint/resume_policy.h"
#include "mirrored/io/checkpoint_file.h"
#include "temp_dir.h"

namespace mirrored::checkpoint {
namespace {

using mirrored::testing::expect_mentions;
using mirrored::testing::TempDir;

TEST(CheckpointSchedule, LogPointsSaveTheScheduledStepsThatDoNotEndAnEpoch) {
  config::TrainConfig config;
  config.checkpoint_every_steps = 10;
  // 25 steps per epoch, 60 in all: 10, 20, 30, 40 at log points; 50 ends epoch 2, 60 the run.
  std::vector<int64_t> saved;
  for (int64_t step = 1; step <= 60; ++step)
    if (save_at_log_point(config, step, 25, 60, false)) saved.push_back(step);
  EXPECT_EQ(saved, (std::vector<int64_t>{10, 20, 30, 40}));
  EXPECT_FALSE(save_at_log_point(config, 30, 25, 60, /*stopping=*/true));  // the epoch end saves it
}

TEST(CheckpointSchedule, EpochEndsSaveByEpochByStepAndTheLastState) {
  config::TrainConfig config;
  config.checkpoint_every_epochs = 2;
  EXPECT_FALSE(save_at_epoch_end(config, 25, 0, 25, 100, false));
  EXPECT_TRUE(save_at_epoch_end(config, 50, 1, 25, 100, false));    // every 2 epochs
  EXPECT_TRUE(save_at_epoch_end(config, 90, 3, 25, 90, false));     // the run's last step
  EXPECT_TRUE(save_at_epoch_end(config, 30, 1, 25, 100, true));     // stopping early
  config.checkpoint_every_epochs = 0;
  config.checkpoint_every_steps = 50;
  EXPECT_TRUE(save_at_epoch_end(config, 50, 1, 25, 100, false));    // a checkpoint step
  config.checkpoint_every_steps = 0;
  EXPECT_FALSE(save_at_epoch_end(config, 100, 3, 25, 100, false));  // checkpoints off: not even the last
}

// A run of 2 x 3 weights and SGD, 10 steps per epoch, 40 in all, writing to `out`.
class ResumeChoiceTest : public ::testing::Test {
 protected:
  ResumeChoiceTest() {
    config_.out = dir_.file("run");
    arena_.declare("0.linear.weight", {2, 3}, 0);
  }

  ResumeTarget target() const { return {config_, arena_, "sgd", {"velocity"}, 10, 40}; }

  io::Checkpoint checkpoint_of(int64_t step, const config::TrainConfig& written_by) const {
    io::Checkpoint c;
    c.step = step;
    c.steps_per_epoch = 10;
    c.epoch = step / 10;
    c.step_in_epoch = step % 10;
    c.optimizer = "sgd";
    c.config = config::to_ini(written_by);
    c.params.push_back({"0.linear.weight", {2, 3}, std::vector<float>(6, static_cast<float>(step))});
    c.optimizer_state.push_back({"velocity", {6}, std::vector<float>(6, 0.5f)});
    return c;
  }

  TempDir dir_;
  config::TrainConfig config_;
  nn::ParameterArena arena_;
};

TEST_F(ResumeChoiceTest, NeverAndAnEmptyDirectoryStartFresh) {
  EXPECT_EQ(choose_resume(target()).status, 0);
  CheckpointWriter(config_).write(checkpoint_of(20, config_));
  config_.resume = config::ResumeMode::kNever;
  EXPECT_EQ(choose_resume(target()).status, 0);
}

TEST_F(ResumeChoiceTest, AutoSkipsABrokenNewestCheckpointForThePreviousOne) {
  CheckpointWriter writer(config_);
  writer.write(checkpoint_of(10, config_));
  writer.write(checkpoint_of(20, config_));
  std::ofstream(writer.path(20), std::ios::trunc) << "truncated";
  const ResumeChoice choice = choose_resume(target());
  EXPECT_EQ(choice.status, 1);
  EXPECT_EQ(choice.source, writer.path(10));
  EXPECT_EQ(choice.checkpoint.step, 10);
}

TEST_F(ResumeChoiceTest, AutoRefusesAnotherRunsDirectoryNamingTheKey) {
  config::TrainConfig other = config_;
  other.lr = 0.5;
  CheckpointWriter(config_).write(checkpoint_of(20, other));
  const ResumeChoice choice = choose_resume(target());
  EXPECT_EQ(choice.status, 3);
  expect_mentions(choice.message, {"another configuration", "lr", "--out DIR", "--resume never"});
}

TEST_F(ResumeChoiceTest, AutoFindsAFinishedRun) {
  CheckpointWriter(config_).write(checkpoint_of(40, config_));
  std::ofstream(std::filesystem::path(config_.out) / "final.h5") << "present";
  const ResumeChoice choice = choose_resume(target());
  EXPECT_EQ(choice.status, 4);
  expect_mentions(choice.message, {"this run is finished", "step 40 of 40"});
}

TEST_F(ResumeChoiceTest, ACheckpointOfAnotherModelIsNotUsable) {
  io::Checkpoint wrong = checkpoint_of(20, config_);
  wrong.params[0] = {"0.linear.weight", {3, 2}, std::vector<float>(6, 1.0f)};
  CheckpointWriter(config_).write(wrong);
  const ResumeChoice choice = choose_resume(target());
  EXPECT_EQ(choice.status, 2);
  expect_mentions(choice.message, {"none of the 1 checkpoint(s)", checkpoint_dir(config_),
                                   "parameter 0 is 0.linear.weight"});
}

// The model the checkpoint records is compared first and named once, in the error: the
// steps per epoch that also differ (a gpt's windows, an mlp's images) are never reached.
TEST_F(ResumeChoiceTest, ANamedCheckpointOfAnotherModelSaysWhichModelItHolds) {
  config::TrainConfig gpt = config_;
  gpt.model = config::ModelKind::kGpt;
  io::Checkpoint of_gpt = checkpoint_of(20, gpt);
  of_gpt.steps_per_epoch = 6233;
  CheckpointWriter writer(config_);
  writer.write(of_gpt);
  config_.resume = config::ResumeMode::kPath;
  config_.resume_path = writer.path(20);
  ::testing::internal::CaptureStderr();
  const ResumeChoice choice = choose_resume(target());
  const std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(choice.status, 2);
  EXPECT_EQ(choice.message, str_cat("resume: '", writer.path(20), "' holds a gpt model (4 layers, 4 heads, width 128, "
                                    "context 64); this run builds an mlp (hidden 256,128)"));
  EXPECT_EQ(warnings, "");  // said once, not warned and then raised
}

}  // namespace
}  // namespace mirrored::checkpoint
