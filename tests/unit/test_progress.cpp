// The progress bar's text and the choice between bar and plain lines.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "mirrored/train/progress.h"

using namespace mirrored::train;
using mirrored::config::ProgressSetting;

TEST(Progress, StyleFollowsTheTerminalUnlessForced) {
  EXPECT_EQ(resolve_progress_style(ProgressSetting::kAuto, false, true), ProgressStyle::kBar);
  EXPECT_EQ(resolve_progress_style(ProgressSetting::kAuto, false, false), ProgressStyle::kPlain);
  EXPECT_EQ(resolve_progress_style(ProgressSetting::kBar, false, false), ProgressStyle::kBar);
  EXPECT_EQ(resolve_progress_style(ProgressSetting::kPlain, false, true), ProgressStyle::kPlain);
  EXPECT_EQ(resolve_progress_style(ProgressSetting::kOff, false, true), ProgressStyle::kOff);
  EXPECT_EQ(resolve_progress_style(ProgressSetting::kBar, true, true), ProgressStyle::kOff);  // --quiet wins
}

TEST(Progress, Durations) {
  EXPECT_EQ(format_duration(0), "0:00");
  EXPECT_EQ(format_duration(59.4), "0:59");
  EXPECT_EQ(format_duration(61), "1:01");
  EXPECT_EQ(format_duration(3723), "1:02:03");
  EXPECT_EQ(format_duration(-1), "?");
  EXPECT_EQ(format_duration(std::nan("")), "?");
}

TEST(Progress, BarText) {
  EXPECT_EQ(format_bar(2, 3, 117, 468, 52100, 0.48213, 3.2, 0),
            "epoch 2/3 [=======>                      ] 117/468  52.1k samples/s  loss 0.4821  ETA 0:03");
  EXPECT_EQ(format_bar(1, 1, 10, 10, 950, 1.5, 0, 0),
            "epoch 1/1 [==============================] 10/10  950 samples/s  loss 1.5000  ETA 0:00");
  EXPECT_EQ(format_bar(1, 1, 0, 10, 0, 0, -1, 0).substr(0, 22), "epoch 1/1 [>" + std::string(10, ' '));
  EXPECT_EQ(format_bar(1, 1, 5, 10, 1, 1, 1, 20).size(), 20u);  // cut to the terminal width
}

TEST(Progress, ALanguageModelsBarCountsTokensAndStepTime) {
  EXPECT_EQ(format_token_bar("", 117, 300, 52100, 12.34, 2.48213, 3.2, 0),
            "step [===========>                  ] 117/300  52.1k tokens/s  12.3 ms/step  loss 2.4821  ETA 0:03");
  EXPECT_EQ(format_token_bar("epoch 1/2", 10, 10, 950, 5, 1.5, 0, 0).substr(0, 11), "epoch 1/2 [");
}
