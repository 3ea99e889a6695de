// elastic/grow_back.h: which resize a relaunch completes. The last {"kind": "resize"} record
// of metrics.jsonl counts only while no membership record follows it (a later shrink, or the
// grow's own record, settles it), so a relaunch reports a growth once.
#include "mirrored/elastic/grow_back.h"

#include <gtest/gtest.h>

#include "mirrored/core/error.h"

namespace {

using namespace mirrored;
using mirrored::elastic::pending_growth;

std::vector<io::JsonObject> parse(const std::vector<std::string>& lines) {
  std::vector<io::JsonObject> records;
  for (const std::string& line : lines) records.push_back(io::parse_json_object(line, "metrics.jsonl"));
  return records;
}

const std::string kShrink = R"({"kind": "membership", "step": 20, "world_size": 3, "lost": [{"rank": 2, "host": "a"}], "recovery_s": 0.2})";
const std::string kResize = R"({"kind": "resize", "step": 31, "world_size": 3, "trigger": "command", "time_ms": 1796494956014})";
const std::string kTrain = R"({"kind": "train", "step": 35, "world_size": 3})";
const std::string kGrown = R"({"kind": "membership", "step": 31, "world_size": 4, "lost": [], "grown": [{"from_world": 3, "to_world": 4, "downtime_s": 2.5, "trigger": "command"}]})";

TEST(GrowBack, TheLastResizeRecordIsPendingUntilAMembershipRecordFollows) {
  EXPECT_FALSE(pending_growth(parse({kShrink, kTrain}), "m").has_value());
  const auto pending = pending_growth(parse({kShrink, kResize, kTrain}), "m");
  ASSERT_TRUE(pending.has_value());
  EXPECT_EQ(pending->step, 31);
  EXPECT_EQ(pending->from_world, 3);
  EXPECT_EQ(pending->trigger, "command");
  EXPECT_EQ(pending->stopped_ms, 1796494956014);
  EXPECT_FALSE(pending_growth(parse({kShrink, kResize, kGrown}), "m").has_value()) << "reported twice";
  EXPECT_TRUE(pending_growth(parse({kShrink, kResize, kGrown, kShrink, kResize}), "m").has_value());
}

TEST(GrowBack, AResizeRecordWithAFieldOfTheWrongTypeIsAnErrorNamingIt) {
  const std::string bad = R"({"kind": "resize", "step": 31, "world_size": 3, "trigger": "command", "time_ms": "soon"})";
  try {
    pending_growth(parse({bad}), "run/metrics.jsonl");
    FAIL() << "accepted";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("run/metrics.jsonl:1"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("time_ms"), std::string::npos) << error.what();
  }
}

}  // namespace
