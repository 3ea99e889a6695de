// app/run_records.h and app/run_report.h: a run directory's records read back strictly and
// safely, and the page built from them.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "error_matchers.h"
#include "mirrored/app/run_records.h"
#include "mirrored/app/run_report.h"
#include "mirrored/core/error.h"
#include "temp_dir.h"

namespace mirrored::app {
namespace {

using testing::expect_mentions;
using testing::message_of;

constexpr const char* kMetrics =
    R"({"kind": "memory", "param_bytes": 10, "grad_bytes": 10, "optimizer_state_bytes": 0}
{"kind": "train", "step": 5, "epoch": 1, "loss": 2.5, "lr": 0.05, "samples_per_sec": 1000, "comm_ms": 1, "exposed_comm_ms": 0.5, "world_size": 2}
{"kind": "rank_scores", "step": 5, "lowest": 0.9, "data": [1, 0.9], "forward": [1, 1], "backward": [1, 1], "optimizer": [1, 1]}
{"kind": "straggler", "step": 5, "rank": 1, "host": "<b>node-b</b>", "phase": "backward", "score": 0.5}
{"kind": "membership", "step": 7, "world_size": 1, "lost": [{"rank": 1, "host": "node-b"}], "recovery_s": 0.25}
{"kind": "train", "step": 10, "epoch": 1, "loss": 1.5, "lr": 0.05, "samples_per_sec": 600, "comm_ms": 0, "exposed_comm_ms": 0, "world_size": 1, "future_field": "x"}
{"kind": "eval", "step": 10, "epoch": 1, "test_loss": 1.25, "test_accuracy": 0.75, "test_samples": 100}
{"kind": "eval", "checkpoint": "c.h5", "data": "d.h5", "test_loss": 1}
{"kind": "membership", "step": 12, "world_size": 1, "lost": [{"rank": 0, "host": "node-a"}], "replaced": [{"rank": 0, "host": "node-a", "by_host": "spare-1"}], "recovery_s": 0.5}
{"kind": "membership", "step": 15, "world_size": 2, "lost": [], "grown": 1}
{"kind": "something_new", "step": 16}
)";

void write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

TEST(RunRecords, ReadsEveryKindAndPassesOverTheRest) {
  RunRecords records;
  parse_metrics(kMetrics, "m.jsonl", records);
  ASSERT_EQ(records.train.size(), 2u);
  EXPECT_EQ(records.train[1].step, 10);
  EXPECT_EQ(records.train[1].world_size, 1);
  EXPECT_FALSE(records.train[1].tokens_per_sec.has_value());
  ASSERT_EQ(records.eval.size(), 1u);  // the one without a step is eval --json's
  EXPECT_EQ(*records.eval[0].accuracy, 0.75);
  ASSERT_EQ(records.stragglers.size(), 1u);
  EXPECT_EQ(records.stragglers[0].phase, "backward");
  ASSERT_EQ(records.membership.size(), 3u);
  const MembershipEvent& shrink = records.membership[0];
  EXPECT_EQ(shrink.kind, "shrink");
  EXPECT_EQ(shrink.world_before, 2);
  EXPECT_EQ(shrink.world_after, 1);
  EXPECT_EQ(shrink.detail, "lost rank 1 (node-b)");
  EXPECT_EQ(*shrink.recovery_s, 0.25);
  EXPECT_EQ(records.membership[1].kind, "replaced");
  EXPECT_EQ(records.membership[1].detail, "rank 0 (node-a) by spare-1; lost rank 0 (node-a)");
  EXPECT_EQ(records.membership[2].kind, "grown");
  EXPECT_EQ(records.membership[2].world_before, 1);
  EXPECT_EQ(records.membership[2].world_after, 2);
  EXPECT_EQ(records.unfinished_lines, 0);
}

TEST(RunRecords, BadLineNamesFileAndLineButAnUnfinishedLastLineIsSkipped) {
  RunRecords records;
  const std::string bad = "{\"kind\": \"train\", \"step\": 1, \"loss\": 1, \"samples_per_sec\": 1, \"world_size\": 1}\n"
                          "{\"kind\": \"train\", \"step\": 2, \"loss\n"
                          "{\"kind\": \"eval\", \"step\": 2, \"test_loss\": 1}\n";
  expect_mentions(message_of<InputError>([&] { parse_metrics(bad, "run/metrics.jsonl", records); }),
                  {"run/metrics.jsonl:2"});
  const std::string wrong_type = "{\"kind\": \"train\", \"step\": \"two\", \"loss\": 1}\n";
  expect_mentions(message_of<InputError>([&] { parse_metrics(wrong_type, "m", records); }), {"m:1", "'step'"});
  RunRecords growing;
  parse_metrics("{\"kind\": \"train\", \"step\": 1, \"loss\": 1, \"samples_per_sec\": 1, \"world_size\": 1}\n"
                "{\"kind\": \"train\", \"step\": 2, \"lo",
                "m", growing);
  EXPECT_EQ(growing.train.size(), 1u);
  EXPECT_EQ(growing.unfinished_lines, 1);
}

TEST(RunRecords, ConfigSectionsBecomeDottedKeys) {
  const auto config = parse_config_text("# resolved\nmodel = gpt\nlr = 0.1\n\n[gpt]\nlayers = 4\n[data]\ntrain = a = b\n");
  ASSERT_EQ(config.size(), 4u);
  EXPECT_EQ(config[2], (std::pair<std::string, std::string>{"gpt.layers", "4"}));
  EXPECT_EQ(config[3], (std::pair<std::string, std::string>{"data.train", "a = b"}));
}

TEST(RunRecords, ReadsARunDirectoryWithoutFollowingSymlinks) {
  testing::TempDir dir;
  const std::string run = dir.file("run");
  ASSERT_EQ(::mkdir(run.c_str(), 0700), 0);
  // config.ini first, as a run writes it: wall_s is the time from its change to metrics.jsonl's,
  // and written second it could change a clock tick later (no wall_s at all).
  write(run + "/config.ini", "model = mlp\n[model]\nhidden = 64\n");
  write(run + "/metrics.jsonl", kMetrics);
  write(run + "/ranks.jsonl", "{\"rank\": 0, \"host\": \"vm\", \"pid\": 42, \"agent_pid\": 0, \"world_size\": 1, \"step\": 7}\n");
  const RunRecords records = read_run_records(run);
  EXPECT_EQ(records.train.size(), 2u);
  ASSERT_EQ(records.ranks.size(), 1u);
  EXPECT_EQ(records.ranks[0].pid, 42);
  EXPECT_EQ(*records.config_value("model.hidden"), "64");
  ASSERT_TRUE(records.wall_s.has_value());  // config.ini's change to metrics.jsonl's (no TensorBoard files)
  EXPECT_GE(*records.wall_s, 0);

  // A symlink planted as a record file, or given as the run directory, is not followed.
  const std::string other = dir.file("elsewhere.jsonl");
  write(other, kMetrics);
  ASSERT_EQ(::unlink((run + "/ranks.jsonl").c_str()), 0);
  ASSERT_EQ(::symlink(other.c_str(), (run + "/ranks.jsonl").c_str()), 0);
  expect_mentions(message_of<InputError>([&] { read_run_records(run); }), {"ranks.jsonl", "symbolic link"});
  const std::string link = dir.file("link");
  ASSERT_EQ(::symlink(run.c_str(), link.c_str()), 0);
  expect_mentions(message_of<InputError>([&] { read_run_records(link); }), {"link", "symbolic link"});
  // A FIFO cannot block the read; a folder without metrics.jsonl is not a run.
  ASSERT_EQ(::unlink((run + "/ranks.jsonl").c_str()), 0);
  ASSERT_EQ(::mkfifo((run + "/ranks.jsonl").c_str(), 0600), 0);
  expect_mentions(message_of<InputError>([&] { read_run_records(run); }), {"ranks.jsonl", "not a regular file"});
  const std::string empty = dir.file("empty");
  ASSERT_EQ(::mkdir(empty.c_str(), 0700), 0);
  const Error error = [&] {
    try {
      read_run_records(empty);
    } catch (const Error& e) {
      return e;
    }
    return Error(ExitCode::kOk, "no error");
  }();
  EXPECT_EQ(error.code(), ExitCode::kUsage);
  expect_mentions(error.what(), {"no metrics.jsonl"});
}

TEST(RunReport, OnePageWithThreeChartsTheEventsAndEverythingEscaped) {
  RunRecords records;
  records.run_dir = "runs/<x>";
  records.config = parse_config_text("model = mlp\n[model]\nhidden = 64\n[data]\ntrain = </pre><script>\n");
  parse_metrics(kMetrics, "m", records);
  const std::string html = run_report_html(records);
  size_t svgs = 0;
  for (size_t at = html.find("<svg "); at != std::string::npos; at = html.find("<svg ", at + 1)) ++svgs;
  EXPECT_EQ(svgs, 3u);
  for (const char* text : {"shrink 2\u21921", "replaced 1\u21921", "grown 1\u21922", "lost rank 1 (node-b)",
                           "mlp (hidden 64)", "samples/s", "runs/&lt;x&gt;", "&lt;b&gt;node-b&lt;/b&gt;",
                           "&lt;/pre&gt;&lt;script&gt;", "2 replica(s) at the start, 1 at the end"})
    EXPECT_NE(html.find(text), std::string::npos) << "missing: " << text;
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  EXPECT_EQ(html.find("http"), std::string::npos);
}

TEST(RunReport, LanguageModelShowsTokensAndValidation) {
  RunRecords records;
  parse_metrics("{\"kind\": \"train\", \"step\": 5, \"loss\": 3, \"samples_per_sec\": 10, \"tokens_per_sec\": 640, "
                "\"world_size\": 1}\n{\"kind\": \"eval\", \"step\": 5, \"val_loss\": 2.5, \"perplexity\": 12.18}\n",
                "m", records);
  const std::string html = run_report_html(records);
  EXPECT_NE(html.find("tokens/s"), std::string::npos);
  EXPECT_NE(html.find("validation loss"), std::string::npos);
  EXPECT_NE(html.find("perplexity 12.180"), std::string::npos);
}

// A long run is drawn from one log point in k (and its last), and the caption says so.
TEST(RunReport, LongSeriesAreThinnedAndSaySo) {
  RunRecords records;
  for (int64_t step = 1; step <= 5000; ++step)
    records.train.push_back({step, 1.0 / static_cast<double>(step), 100, std::nullopt, 1});
  const std::string html = run_report_html(records);
  EXPECT_NE(html.find("Drawn from one log point in 3 and the last."), std::string::npos);
  const size_t path = html.find("<path d=\"");
  ASSERT_NE(path, std::string::npos);
  const std::string d = html.substr(path, html.find('"', path + 9) - path);
  size_t points = 0;
  for (const char c : d) points += c == 'L' || c == 'M';
  EXPECT_EQ(points, 1668u);  // steps 1, 4, ..., 4999 (1667 points) and 5000
}

}  // namespace
}  // namespace mirrored::app
