// A rank started by `mirrored rank-agent` that saw its job lose ranks: it tells the agent to
// hold the runtime's ending signals ("h") for kOutliveWindowSeconds, copies its output to the
// run-state directory's `output` meanwhile (mode 0600), and lets go ("r") when the window
// closes with the runtime still there. The pipe stands in for the agent, this process's parent for the agent's pid.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "mirrored/comm/failure/runtime_loss.h"
#include "mirrored/core/log.h"
#include "temp_dir.h"

namespace {

using namespace mirrored;

// What the agent has been told so far ("" when nothing).
std::string told(int fd) {
  std::string bytes;
  char byte = 0;
  while (read(fd, &byte, 1) == 1) bytes.push_back(byte);
  return bytes;
}

std::string contents(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// In a child process: whether this process counts as started by the agent is read once,
// and the next test needs it read afresh when both run in one process.
TEST(RuntimeLoss, WithoutTheAgentARankNeverOutlivesTheRuntime) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    unsetenv("MIRRORED_RANK_AGENT_FD");
    unsetenv("MIRRORED_RANK_AGENT_PID");
    comm::watch_runtime_connection();  // no agent: registers nothing
    comm::outlive_runtime_after_loss();
    _exit(!comm::launched_by_rank_agent() && !comm::outlives_runtime() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "a rank without the agent said it outlives the runtime";
}

TEST(RuntimeLoss, AfterALossTheAgentHoldsForAWindowAndTheOutputIsCopied) {
  mirrored::testing::TempDir dir;
  int agent[2];
  ASSERT_EQ(pipe(agent), 0);
  ASSERT_EQ(fcntl(agent[0], F_SETFL, O_NONBLOCK), 0);
  const std::string state = dir.file("state");
  ASSERT_EQ(mkdir(state.c_str(), 0700), 0);
  setenv("MIRRORED_RANK_AGENT_FD", std::to_string(agent[1]).c_str(), 1);
  setenv("MIRRORED_RANK_AGENT_PID", std::to_string(getppid()).c_str(), 1);
  setenv("MIRRORED_RUN_STATE_DIR", state.c_str(), 1);
  ASSERT_TRUE(comm::launched_by_rank_agent());

  rank_warning("a line before the loss");
  EXPECT_FALSE(comm::outlives_runtime());
  comm::outlive_runtime_after_loss();
  EXPECT_TRUE(comm::outlives_runtime());
  EXPECT_EQ(told(agent[0]), "h");
  rank_warning("a line after the loss");
  comm::outlive_runtime_after_loss();  // a second loss in the window: the agent already holds
  comm::tend_runtime_loss();           // the window is open
  EXPECT_EQ(told(agent[0]), "");
  EXPECT_TRUE(comm::outlives_runtime());
  EXPECT_FALSE(comm::runtime_gone());

  std::this_thread::sleep_for(std::chrono::duration<double>(comm::kOutliveWindowSeconds + 0.2));
  comm::tend_runtime_loss();
  EXPECT_EQ(told(agent[0]), "r") << "the window closed with the runtime there: the agent passes signals on again";
  EXPECT_FALSE(comm::outlives_runtime());
  rank_warning("a line after the window");

  const std::string copied = contents(state + "/output");
  struct stat info {};
  ASSERT_EQ(stat((state + "/output").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u) << "the output copy is readable by others";
  EXPECT_EQ(copied.find("a line before the loss"), std::string::npos) << copied;
  EXPECT_NE(copied.find("a line after the loss"), std::string::npos) << copied;
  EXPECT_EQ(copied.find("a line after the window"), std::string::npos) << copied;
  close(agent[0]);
  close(agent[1]);
}

}  // namespace
