// How an error reaches stderr: the rank and host prefix appears exactly once, whether the
// message comes from MIRRORED_CHECK (where()) or from a plain line.
#include <gtest/gtest.h>

#include <string>

#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/core/process.h"

namespace mirrored {
namespace {

size_t occurrences(const std::string& text, const std::string& needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++count;
  return count;
}

// Sets a recognisable identity for one test and restores the previous one afterwards.
class ErrorReport : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = process_identity();
    set_process_identity({3, 4, "node-under-test"});
  }
  void TearDown() override { set_process_identity(saved_); }
  ProcessIdentity saved_;
};

TEST_F(ErrorReport, WhereCarriesFileAndLineButNoRankOrHost) {
  const std::string text = where("src/x.cpp", 12, "it broke");
  EXPECT_EQ(text, "src/x.cpp:12: it broke");
}

TEST_F(ErrorReport, InternalErrorNamesRankAndHostOnce) {
  std::string message;
  try {
    MIRRORED_CHECK(1 + 1 == 3, "arithmetic");
  } catch (const Error& error) {
    message = error.what();
  }
  ASSERT_FALSE(message.empty()) << "MIRRORED_CHECK did not throw";
  ::testing::internal::CaptureStderr();
  rank_error(message);
  const std::string printed = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(printed.rfind("mirrored: error [rank 3/4 on node-under-test]: ", 0), 0u) << printed;
  EXPECT_EQ(occurrences(printed, "node-under-test"), 1u) << printed;
  EXPECT_EQ(occurrences(printed, "rank 3/4"), 1u) << printed;
  EXPECT_NE(printed.find("check failed: 1 + 1 == 3 arithmetic"), std::string::npos) << printed;
}

TEST_F(ErrorReport, WarningNamesRankAndHostOnce) {
  ::testing::internal::CaptureStderr();
  rank_warning(where("src/y.cpp", 7, "slow"));
  const std::string printed = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(printed, "mirrored: warning [rank 3/4 on node-under-test]: src/y.cpp:7: slow\n");
}

}  // namespace
}  // namespace mirrored
