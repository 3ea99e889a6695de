// core/run_state.h: the run-state directory is used only when it is this user's, of mode 0700
// and not a symlink; its files are never opened through a symlink; relayed requests come only
// from a file of this user that no one else may write, and only from the allow-list. Each
// test runs in a child process: the directory is opened once per process.
#include "mirrored/core/run_state.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "mirrored/core/process.h"
#include "temp_dir.h"

namespace {

using namespace mirrored;
using mirrored::testing::TempDir;
namespace fs = std::filesystem;

std::string contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

template <typename Body>
void in_child_with_state(const std::string& state, Body body) {
  const pid_t child = fork();
  if (child == 0) {
    setenv(kRunStateVariable, state.c_str(), 1);
    body();
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child's checks failed (see above)";
}

TEST(RunState, AProperDirectoryGetsTheExitStatusWithMode0600) {
  TempDir dir;
  const std::string state = dir.file("state");
  ASSERT_EQ(mkdir(state.c_str(), 0700), 0);
  in_child_with_state(state, [] {
    EXPECT_GE(run_state_dir(), 0);
    report_exit_status(7);
  });
  EXPECT_EQ(contents(state + "/exit-status"), "7\n");
  struct stat info {};
  ASSERT_EQ(stat((state + "/exit-status").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
}

TEST(RunState, ASymlinkAnOpenModeOrAForeignOwnerIsRefused) {
  TempDir dir;
  const std::string real = dir.file("real"), link = dir.file("link"), open = dir.file("open");
  ASSERT_EQ(mkdir(real.c_str(), 0700), 0);
  fs::create_symlink(real, link);
  ASSERT_EQ(mkdir(open.c_str(), 0700), 0);
  ASSERT_EQ(chmod(open.c_str(), 0755), 0);
  for (const std::string& refused : {link, open}) {
    in_child_with_state(refused, [] {
      EXPECT_LT(run_state_dir(), 0);
      EXPECT_FALSE(write_run_state_file("exit-status", "0\n"));
    });
  }
  EXPECT_FALSE(fs::exists(real + "/exit-status")) << "written through the symlink";
  EXPECT_FALSE(fs::exists(open + "/exit-status"));
  if (geteuid() != 0) GTEST_SKIP() << "a directory of another owner needs root to make (chown)";
  const std::string foreign = dir.file("foreign");
  ASSERT_EQ(mkdir(foreign.c_str(), 0700), 0);
  ASSERT_EQ(chown(foreign.c_str(), 65534, 65534), 0);
  in_child_with_state(foreign, [&] {
    const int fd = ::open(foreign.c_str(), O_RDONLY | O_DIRECTORY);
    EXPECT_NE(run_state_dir_problem(fd).find("owned by uid 65534"), std::string::npos) << run_state_dir_problem(fd);
    EXPECT_LT(run_state_dir(), 0);
  });
}

TEST(RunState, FilesAreNeverOpenedThroughASymlink) {
  TempDir dir;
  const std::string state = dir.file("state"), victim = dir.file("victim");
  ASSERT_EQ(mkdir(state.c_str(), 0700), 0);
  std::ofstream(victim) << "precious\n";
  fs::create_symlink(victim, state + "/output");
  fs::create_symlink(victim, state + "/exit-status");
  in_child_with_state(state, [] {
    EXPECT_LT(open_run_state_file_for_append("output"), 0);
    EXPECT_TRUE(write_run_state_file("exit-status", "3\n"));  // replaces the symlink itself
  });
  EXPECT_EQ(contents(victim), "precious\n");
  EXPECT_EQ(contents(state + "/exit-status"), "3\n");
  EXPECT_FALSE(fs::is_symlink(state + "/exit-status"));
}

TEST(RunState, OnlyTheAllowListIsActedOn) {
  size_t consumed = 0;
  const auto requests = parse_relayed_requests("USR1\nSIGTERM\nINT\nHUP\nUSR2\nabort\n9\nKILL\nSTOP\nSEGV\nUSR", consumed);
  ASSERT_EQ(requests.size(), 10u);
  const int expected[] = {SIGUSR1, SIGTERM, SIGINT, SIGHUP, SIGUSR2};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(requests[i].kind, RelayedRequest::Kind::kSignal) << requests[i].text;
    EXPECT_EQ(requests[i].signal, expected[i]) << requests[i].text;
  }
  EXPECT_EQ(requests[5].kind, RelayedRequest::Kind::kAbort);
  for (size_t i = 6; i < requests.size(); ++i)
    EXPECT_EQ(requests[i].kind, RelayedRequest::Kind::kRefused) << requests[i].text;
  EXPECT_EQ(consumed, std::string("USR1\nSIGTERM\nINT\nHUP\nUSR2\nabort\n9\nKILL\nSTOP\nSEGV\n").size())
      << "a partial last line waits for the rest";
}

TEST(RunState, RequestsAreReadOnlyFromAPlainFileOfThisUserThatOnlyItMayWrite) {
  TempDir dir;
  const std::string state = dir.file("state");
  ASSERT_EQ(mkdir(state.c_str(), 0700), 0);
  const std::string signals = state + "/signals";
  in_child_with_state(state, [&] {
    RunStateReader reader("signals");
    EXPECT_EQ(reader.read_new_lines(), "");  // none yet
    std::ofstream(signals) << "USR1\nTE";
    EXPECT_EQ(reader.read_new_lines(), "USR1\n");
    std::ofstream(signals, std::ios::app) << "RM\n";
    EXPECT_EQ(reader.read_new_lines(), "TERM\n");
    // Replaced (a new file under the name): read from its start.
    fs::remove(signals);
    std::ofstream(signals) << "HUP\n";
    EXPECT_EQ(reader.read_new_lines(), "HUP\n");
    // Writable by others: ignored.
    fs::remove(signals);
    std::ofstream(signals) << "USR2\n";
    chmod(signals.c_str(), 0666);
    EXPECT_EQ(reader.read_new_lines(), "");
    // A symlink: ignored.
    fs::remove(signals);
    std::ofstream(state + "/elsewhere") << "USR2\n";
    fs::create_symlink(state + "/elsewhere", signals);
    EXPECT_EQ(reader.read_new_lines(), "");
    if (geteuid() == 0) {  // another user's file (a neighbour's, were the directory not private)
      fs::remove(signals);
      std::ofstream(signals) << "KILL\nUSR2\n";
      chmod(signals.c_str(), 0600);
      EXPECT_EQ(chown(signals.c_str(), 65534, 65534), 0);
      EXPECT_EQ(reader.read_new_lines(), "");
    }
  });
}

// The resize requests: `mirrored resize` and the launch scripts append one a line to the
// run-state file `resize`; only the allow-list counts.
TEST(RunState, ResizeRequestsComeFromTheAllowListOnly) {
  const auto requests = parse_resize_requests(
      "command\nsignal\nhost-returned node-b.cluster_1\n\nKILL\nhost-returned \nhost-returned a b\n"
      "host-returned $(reboot)\ncommand extra\nhost-returned node-c");
  ASSERT_EQ(requests.size(), 8u) << "the partial last line waits for the rest";
  EXPECT_TRUE(requests[0].accepted);
  EXPECT_EQ(requests[0].trigger, "command");
  EXPECT_TRUE(requests[1].accepted);
  EXPECT_EQ(requests[1].trigger, "signal");
  EXPECT_TRUE(requests[2].accepted);
  EXPECT_EQ(requests[2].trigger, "host-returned node-b.cluster_1");
  for (size_t i = 3; i < requests.size(); ++i) EXPECT_FALSE(requests[i].accepted) << requests[i].text;
  EXPECT_EQ(requests[3].text, "KILL");
}

TEST(RunState, AResizeRequestIsAppendedWithMode0600) {
  TempDir dir;
  const std::string state = dir.file("state");
  ASSERT_EQ(mkdir(state.c_str(), 0700), 0);
  EXPECT_EQ(append_resize_request(state, "command"), "");
  EXPECT_EQ(append_resize_request(state, "host-returned node-b"), "");
  EXPECT_EQ(contents(state + "/resize"), "command\nhost-returned node-b\n");
  struct stat info {};
  ASSERT_EQ(stat((state + "/resize").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  EXPECT_NE(append_resize_request(state, "KILL").find("not a resize trigger"), std::string::npos);
  // The chief reads it back line by line.
  in_child_with_state(state, [] {
    RunStateReader reader(kResizeRequestFile);
    EXPECT_EQ(reader.read_new_lines(), "command\nhost-returned node-b\n");
    EXPECT_EQ(reader.read_new_lines(), "");
  });
}

TEST(RunState, AResizeRequestGoesOnlyIntoAPrivateDirectoryOfThisUser) {
  TempDir dir;
  const std::string real = dir.file("real"), link = dir.file("link"), open = dir.file("open");
  ASSERT_EQ(mkdir(real.c_str(), 0700), 0);
  fs::create_symlink(real, link);
  ASSERT_EQ(mkdir(open.c_str(), 0700), 0);
  ASSERT_EQ(chmod(open.c_str(), 0755), 0);
  EXPECT_NE(append_resize_request(link, "command").find("a symlink or not a directory"), std::string::npos);
  EXPECT_NE(append_resize_request(open, "command").find("mode 0755, expected 0700"), std::string::npos);
  EXPECT_NE(append_resize_request(dir.file("missing"), "command"), "");
  EXPECT_FALSE(fs::exists(real + "/resize")) << "written through the symlink";
  EXPECT_FALSE(fs::exists(open + "/resize"));
  if (geteuid() != 0) GTEST_SKIP() << "a directory of another owner needs root to make (chown)";
  const std::string foreign = dir.file("foreign");
  ASSERT_EQ(mkdir(foreign.c_str(), 0700), 0);
  ASSERT_EQ(chown(foreign.c_str(), 65534, 65534), 0);
  EXPECT_NE(append_resize_request(foreign, "command").find("owned by uid 65534"), std::string::npos);
  EXPECT_FALSE(fs::exists(foreign + "/resize"));
}

TEST(RunState, AResizeFileThatIsASymlinkWritableByOthersOrAnotherUsersIsRefused) {
  TempDir dir;
  const std::string state = dir.file("state"), victim = dir.file("victim");
  ASSERT_EQ(mkdir(state.c_str(), 0700), 0);
  const std::string resize = state + "/resize";
  std::ofstream(victim) << "precious\n";
  // A symlink: neither followed by the writer nor by the reader.
  fs::create_symlink(victim, resize);
  EXPECT_NE(append_resize_request(state, "command").find("resize: a symlink"), std::string::npos);
  EXPECT_EQ(contents(victim), "precious\n");
  in_child_with_state(state, [] { EXPECT_EQ(RunStateReader(kResizeRequestFile).read_new_lines(), ""); });
  // Writable by others (mode 0622): refused both ways.
  fs::remove(resize);
  std::ofstream(resize) << "command\n";
  ASSERT_EQ(chmod(resize.c_str(), 0622), 0);
  EXPECT_NE(append_resize_request(state, "command").find("mode 0622: others may write it"), std::string::npos);
  in_child_with_state(state, [] { EXPECT_EQ(RunStateReader(kResizeRequestFile).read_new_lines(), ""); });
  EXPECT_EQ(contents(resize), "command\n") << "appended to a file others may write";
  if (geteuid() != 0) GTEST_SKIP() << "a file of another owner needs root to make (chown)";
  ASSERT_EQ(chmod(resize.c_str(), 0600), 0);
  ASSERT_EQ(chown(resize.c_str(), 65534, 65534), 0);
  EXPECT_NE(append_resize_request(state, "command").find("owned by uid 65534"), std::string::npos);
  in_child_with_state(state, [] { EXPECT_EQ(RunStateReader(kResizeRequestFile).read_new_lines(), ""); });
}

}  // namespace
