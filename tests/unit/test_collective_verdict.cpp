// The flight recorder's ring and the verdicts drawn from rings (comm/health/flight_recorder.h,
// comm/health/collective_verdict.h): exact records, exact verdict lines.
#include <gtest/gtest.h>

#include "mirrored/comm/health/collective_verdict.h"
#include "mirrored/comm/health/flight_recorder.h"
#include "mirrored/io/jsonl_reader.h"
#include "temp_dir.h"

namespace mirrored::comm {
namespace {

CollectiveCall call(const char* operation, size_t count, int channel = 0) {
  return {operation, count, DataType::kF32, channel};
}

TEST(FlightRecorder, NumbersCollectivesPerChannelAndKeepsTheLastOnes) {
  FlightRecorder recorder(3);
  const int world = recorder.add_channel("world");
  const int gradients = recorder.add_channel("gradients");
  for (size_t i = 0; i < 4; ++i) recorder.finish(recorder.start(call("allreduce", i, world)));
  const auto in_flight = recorder.start(call("allreduce", 100, gradients));
  const std::vector<CollectiveRecord> ring = recorder.snapshot();
  ASSERT_EQ(ring.size(), 3u);  // the oldest two of five were overwritten
  EXPECT_EQ(recorder.recorded(), 5u);
  EXPECT_EQ(ring[0].communicator, "world");
  EXPECT_EQ(ring[0].sequence, 2u);
  EXPECT_EQ(ring[0].count, 2u);
  EXPECT_EQ(ring[1].sequence, 3u);
  EXPECT_TRUE(ring[1].completed());
  EXPECT_EQ(ring[2].communicator, "gradients");
  EXPECT_EQ(ring[2].sequence, 0u);  // its own channel counts from 0
  EXPECT_FALSE(ring[2].completed());
  EXPECT_EQ(in_flight.sequence, 0u);
}

TEST(FlightRecorder, TheCallSiteIsPartOfTheRecordAndTheFingerprint) {
  FlightRecorder recorder(4);
  const int world = recorder.add_channel("world");
  FlightRecorder::Ticket plain = recorder.start(call("allreduce", 8, world));
  FlightRecorder::Ticket bucket;
  {
    CallSite site("gradient bucket", 3);
    bucket = recorder.start(call("allreduce", 8, world));
  }
  EXPECT_NE(plain.fingerprint, bucket.fingerprint);
  EXPECT_EQ(recorder.snapshot()[1].site, "gradient bucket 3");
  EXPECT_STREQ(CallSite::current_what(), "");  // restored when the site ends
  EXPECT_EQ(describe_collective(recorder.snapshot()[1]), "allreduce #1 on world (8 float, gradient bucket 3)");
  // The same call gets the same fingerprint on every rank: a function of the call alone.
  EXPECT_EQ(plain.fingerprint, collective_fingerprint("world", "allreduce", 8, DataType::kF32, "", -1));
}

TEST(FlightRecorder, OffRecordsNothingButStillNumbers) {
  FlightRecorder recorder(0);
  recorder.add_channel("world");
  EXPECT_EQ(recorder.start(call("barrier", 0)).sequence, 0u);
  EXPECT_EQ(recorder.start(call("barrier", 0)).sequence, 1u);
  EXPECT_TRUE(recorder.snapshot().empty());
}

TEST(FlightRecorder, ADumpReadsBackAsJsonLines) {
  testing::TempDir dir;
  FlightRecorder recorder(8);
  recorder.add_channel("world");
  recorder.finish(recorder.start(call("broadcast", 7)));
  recorder.start(call("allreduce", 9));
  ASSERT_TRUE(recorder.dump(dir.file("rank-0.jsonl"), "\"rank\": 0, \"world\": 2"));
  const auto lines = io::read_jsonl(dir.file("rank-0.jsonl"));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(io::json_string(lines[0], "kind", "header"), "trace");
  EXPECT_EQ(io::json_number(lines[0], "world", "header"), 2);
  EXPECT_EQ(io::json_number(lines[0], "ring", "header"), 8);
  EXPECT_EQ(io::json_string(lines[1], "op", "1"), "broadcast");
  EXPECT_EQ(io::json_string(lines[1], "state", "1"), "completed");
  EXPECT_EQ(io::json_number(lines[2], "count", "2"), 9);
  EXPECT_EQ(io::json_string(lines[2], "state", "2"), "started");
  EXPECT_EQ(io::json_number(lines[2], "end_us", "2"), 0);
}

// A rank's ring from (sequence, operation, count, completed) tuples on "world", started in order.
RankTrace rank(int r, std::vector<std::tuple<uint64_t, const char*, uint64_t, bool>> calls, int64_t step = -1) {
  RankTrace trace;
  trace.rank = r;
  trace.host = "h" + std::to_string(r);
  trace.present = true;
  trace.step = step;
  int64_t time = 1000;
  for (const auto& [sequence, operation, count, completed] : calls) {
    CollectiveRecord record;
    record.sequence = sequence;
    record.communicator = "world";
    record.operation = operation;
    record.count = count;
    record.type = "float";
    record.fingerprint = collective_fingerprint("world", operation, count, DataType::kF32, "", -1);
    record.start_us = time;
    record.end_us = completed ? time + 5 : 0;
    time += 10;
    trace.records.push_back(record);
  }
  return trace;
}

RankTrace absent(int r) {
  RankTrace trace;
  trace.rank = r;
  return trace;
}

TEST(CollectiveVerdict, NamesTheRankThatDidNotJoin) {
  const Verdict v = trace_verdict({rank(0, {{0, "allreduce", 4, true}, {1, "allreduce", 4, false}}),
                                   rank(1, {{0, "allreduce", 4, true}}),
                                   rank(2, {{0, "allreduce", 4, true}, {1, "allreduce", 4, false}})});
  EXPECT_EQ(v.kind, VerdictKind::kMissing);
  EXPECT_EQ(v.ranks, std::vector<int>{1});
  EXPECT_EQ(v.headline, "rank 1 did not join collective #1 on world: allreduce of 4 float; ranks {0, 2} joined it");
  EXPECT_EQ(v.details[1], "rank 1 on h1: not there; its last collective on world was #0");
}

TEST(CollectiveVerdict, ARankWithoutADumpIsMissing) {
  const Verdict v = trace_verdict({rank(0, {{0, "allgather", 2, false}}), absent(1)});
  EXPECT_EQ(v.kind, VerdictKind::kMissing);
  EXPECT_EQ(v.headline, "rank 1 did not join collective #0 on world: allgather of 2 float; rank 0 joined it");
  EXPECT_EQ(v.details[1], "rank 1: no dump (stopped, dead or unreachable)");
}

TEST(CollectiveVerdict, NamesRanksThatRanADifferentCollective) {
  const Verdict v = trace_verdict({rank(0, {{0, "allreduce", 1, false}}), rank(1, {{0, "barrier", 0, false}}),
                                   rank(2, {{0, "allreduce", 1, false}})});
  EXPECT_EQ(v.kind, VerdictKind::kMismatch);
  EXPECT_EQ(v.ranks, std::vector<int>{1});
  EXPECT_EQ(v.headline,
            "mismatch at collective #0 on world: ranks {0, 2} ran allreduce of 1 float; rank 1 ran barrier of 0 "
            "float (every rank must issue the same collectives in the same order)");
}

TEST(CollectiveVerdict, AllWaitingNamesTheSlowestRanksStep) {
  const Verdict v = trace_verdict({rank(0, {{0, "allreduce", 3, false}}, 12), rank(1, {{0, "allreduce", 3, false}}, 11)});
  EXPECT_EQ(v.kind, VerdictKind::kAllWaiting);
  EXPECT_EQ(v.headline,
            "all ranks are alive and waiting in the same collective #0 on world: allreduce of 3 float; the slowest "
            "rank's last completed step: rank 1 at step 11");
}

TEST(CollectiveVerdict, ARankSilentInsideTheCollectiveIsNamed) {
  // Rank 1 joined and was then stopped: only the chief's silence list tells it apart.
  RankTrace chief = rank(0, {{0, "allreduce", 3, false}}, 12);
  chief.silent = {1};
  const Verdict v = trace_verdict({chief, rank(1, {{0, "allreduce", 3, false}}, 12), rank(2, {{0, "allreduce", 3, false}})});
  EXPECT_EQ(v.kind, VerdictKind::kSilent);
  EXPECT_EQ(v.ranks, std::vector<int>{1});
  EXPECT_EQ(v.headline,
            "rank 1 stopped responding inside collective #0 on world: allreduce of 3 float; ranks {0, 2} wait in it");
}

TEST(CollectiveVerdict, NothingInFlightAndNoDumps) {
  EXPECT_EQ(trace_verdict({rank(0, {{0, "barrier", 0, true}}), rank(1, {{0, "barrier", 0, true}})}).kind,
            VerdictKind::kIdle);
  EXPECT_EQ(trace_verdict({absent(0), absent(1)}).kind, VerdictKind::kNoTrace);
}

TEST(CollectiveVerdict, TheHeartbeatComparisonNamesBothCalls) {
  const CollectiveRecord mine = rank(0, {{7, "allreduce", 1, false}}).records[0];
  const CollectiveRecord theirs = rank(1, {{7, "barrier", 0, false}}).records[0];
  EXPECT_EQ(collective_mismatch(mine, "rank 0", theirs, "rank 1"),
            "rank 1 runs barrier #7 on world (0 float) where rank 0 runs allreduce #7 on world (1 float)");
  EXPECT_EQ(collective_mismatch(mine, "rank 0", mine, "rank 1"), "");
  const CollectiveRecord later = rank(1, {{8, "barrier", 0, false}}).records[0];
  EXPECT_EQ(collective_mismatch(mine, "rank 0", later, "rank 1"), "");  // not comparable
}

}  // namespace
}  // namespace mirrored::comm
