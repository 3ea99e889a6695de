// How fast Open MPI's heartbeat detector must declare one rank failed (on_failure = shrink):
// its ring declares a lost node's ranks one after another, so a node of N ranks is
// declared within half the collective timeout. And a survivor's write to a lost peer fails
// instead of ending it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>

#include "mirrored/comm/failure/fault_tolerance.h"

using mirrored::comm::detection_seconds;

TEST(FailureDetection, ANodesRanksTogetherWithinHalfTheCollectiveTimeout) {
  EXPECT_DOUBLE_EQ(detection_seconds(300, 1), 150);
  EXPECT_DOUBLE_EQ(detection_seconds(300, 8), 18.75);
  EXPECT_DOUBLE_EQ(detection_seconds(10, 2), 2.5);
  for (int ranks : {1, 2, 4, 8, 16}) EXPECT_LE(ranks * detection_seconds(600, ranks), 300.0) << ranks;
}

TEST(FailureDetection, NeverBelowTwoSecondsNorForAnUnknownNode) {
  // Shorter declares ranks that are only busy (heartbeats ride on MPI's progress): at 1 s,
  // four ranks on two cores busy with a build were declared failed while alive.
  EXPECT_DOUBLE_EQ(detection_seconds(4, 4), 2.0);
  EXPECT_DOUBLE_EQ(detection_seconds(5, 2), 2.0);
  EXPECT_DOUBLE_EQ(detection_seconds(10, 0), 5.0) << "ranks per node unknown: counted as 1";
  EXPECT_DOUBLE_EQ(detection_seconds(0, 4), 0.0) << "no collective timeout: Open MPI's default";
}

TEST(FailureDetection, AWriteToALostPeerFailsInsteadOfEndingTheWriter) {
  int ends[2];
  ASSERT_EQ(pipe(ends), 0);
  ASSERT_EQ(close(ends[0]), 0);  // the reader is gone, as a dead peer's socket
  mirrored::comm::ignore_broken_pipes();
  const char byte = 0;
  errno = 0;
  EXPECT_EQ(write(ends[1], &byte, 1), -1);  // with SIGPIPE's default action this test would end here
  EXPECT_EQ(errno, EPIPE);
  close(ends[1]);
}
