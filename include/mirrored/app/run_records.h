#pragma once
// What a run directory records (docs/training.md, "What a run writes"), read back for
// `mirrored report`: the train, eval, membership and straggler records of metrics.jsonl,
// config.ini's resolved configuration, ranks.jsonl's current world and the run's wall time.
//
// The files are data from strangers (a shared folder): each is opened with O_NOFOLLOW
// below a run directory itself opened without following a symlink, must be a regular
// file within a size bound, and every line is parsed strictly (io/jsonl_reader.h). A bad
// line is an InputError naming the file and line, except an unfinished last line (no
// newline yet: the run is still appending), which is skipped and counted. Records of other
// kinds (memory, rank_scores, and any later ones) and fields not listed here are passed over.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mirrored::app {

inline constexpr uint64_t kMaxMetricsBytes = uint64_t{1} << 30;  // 1 GiB
inline constexpr uint64_t kMaxConfigBytes = uint64_t{1} << 20;
inline constexpr uint64_t kMaxRanksBytes = uint64_t{16} << 20;

struct TrainRecord {
  int64_t step = 0;
  double loss = 0;
  double samples_per_sec = 0;
  std::optional<double> tokens_per_sec;  // a language model's
  int64_t world_size = 0;
};

// A classifier's test_loss and test_accuracy, or a language model's val_loss and perplexity.
struct EvalRecord {
  int64_t step = 0;
  double loss = 0;
  std::optional<double> accuracy;
  std::optional<double> perplexity;
};

// A change of the world: ranks lost (shrink), replaced by spares, or the world grown back.
struct MembershipEvent {
  int64_t step = 0;
  int64_t world_before = 0;  // the world of the train record before it (0: none yet)
  int64_t world_after = 0;
  std::string kind;    // "shrink", "replaced" or "grown"
  std::string detail;  // who: "rank 1 (node-b)", "rank 1 (node-b) by node-c"
  std::optional<double> recovery_s;
};

struct StragglerRecord {
  int64_t step = 0;
  int64_t rank = 0;
  std::string host;
  std::string phase;
  double score = 0;
};

struct RankPlace {
  int64_t rank = 0;
  std::string host;
  int64_t pid = 0;
};

struct RunRecords {
  std::string run_dir;
  std::vector<std::pair<std::string, std::string>> config;  // "section.key" = value, in file order
  std::vector<TrainRecord> train;
  std::vector<EvalRecord> eval;
  std::vector<MembershipEvent> membership;
  std::vector<StragglerRecord> stragglers;
  std::vector<RankPlace> ranks;  // ranks.jsonl: the current world
  int64_t unfinished_lines = 0;  // an unfinished last line, skipped (a run still writing)
  // From the first TensorBoard event file's creation (its name's time; config.ini's change
  // time without one) to metrics.jsonl's last change.
  std::optional<double> wall_s;

  const std::string* config_value(const std::string& key) const;
};

// Reads `run_dir`. Throws InputError (exit 3) naming the file, and the line for a bad record;
// a run directory without metrics.jsonl is an error (ExitCode::kUsage) that says so.
RunRecords read_run_records(const std::string& run_dir);

// Parses metrics.jsonl's text (`origin` names it in errors) into `records`: for tests and
// for read_run_records.
void parse_metrics(const std::string& text, const std::string& origin, RunRecords& records);
// Parses config.ini's text: "key = value" lines, "[section]" headers, '#' comments.
std::vector<std::pair<std::string, std::string>> parse_config_text(const std::string& text);

}  // namespace mirrored::app
