#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "mirrored/comm/mpi_tuning.h"

namespace mirrored {
namespace {

constexpr const char* kVariable = "OMPI_MCA_coll_libnbc_iallreduce_algorithm";

// Restores the variable as it was, whatever the test did to it.
class SavedVariable {
 public:
  SavedVariable() {
    if (const char* value = std::getenv(kVariable)) saved_ = value;
  }
  ~SavedVariable() {
    if (saved_) {
      setenv(kVariable, saved_->c_str(), 1);
    } else {
      unsetenv(kVariable);
    }
  }

 private:
  std::optional<std::string> saved_;
};

TEST(MpiTuning, ChoosesTheRingWhereTheUserHasNotChosen) {
  SavedVariable saved;
  unsetenv(kVariable);
  EXPECT_STREQ(comm::choose_nonblocking_allreduce_algorithm(), "ring");
  ASSERT_NE(std::getenv(kVariable), nullptr);
  EXPECT_STREQ(std::getenv(kVariable), "ring");
  setenv(kVariable, "", 1);  // set but empty counts as not chosen
  EXPECT_STREQ(comm::choose_nonblocking_allreduce_algorithm(), "ring");
}

TEST(MpiTuning, LeavesTheUsersChoiceAlone) {
  SavedVariable saved;
  setenv(kVariable, "recursive_doubling", 1);
  EXPECT_STREQ(comm::choose_nonblocking_allreduce_algorithm(), "recursive_doubling");
  EXPECT_STREQ(std::getenv(kVariable), "recursive_doubling");
}

}  // namespace
}  // namespace mirrored
