// mirrored info --ranks RUN_DIR: the straggler scores of a run, per rank, from its
// metrics.jsonl ({"kind": "rank_scores"} at every log point of a multi-rank run, and
// {"kind": "straggler"} for each flagged rank; train/straggler.h defines the score), and
// the world's changes ({"kind": "membership"}: on_failure = shrink; with "grown" when a
// resized job came back at full size, elastic/grow_back.h). Every other record
// mirrored writes there (train, eval, memory) is read and passed over.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>

#include "commands.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/core/strings.h"
#include "mirrored/io/jsonl_reader.h"
#include "mirrored/train/straggler.h"

namespace mirrored::cli {
namespace {
struct RankSummary {
  double sum[train::kScoredPhases] = {};
  int64_t points = 0;
  double lowest = 1e300;
  std::string lowest_phase;
  int64_t flagged = 0;
  std::string host;
};
// A membership record's line: the world after the change, and what changed (ranks lost, or
// the world grown back, with its downtime).
std::string membership_line(const io::JsonObject& record, const std::string& origin) {
  std::string line = str_cat("  step ", io::json_integer(record, "step", origin, 0, INT64_MAX), ": world size ",
                             io::json_integer(record, "world_size", origin, 1, INT32_MAX));
  const auto grown = record.find("grown");
  const auto* grown_text = grown == record.end() ? nullptr : std::get_if<io::JsonText>(&grown->second);
  // "grown": [{"from_world", "to_world", "downtime_s", "trigger", "stopped_ms", "first_step_ms"}], one object.
  if (grown_text && grown_text->text.size() > 2) {
    const std::string& text = grown_text->text;
    const io::JsonObject event = io::parse_json_object(text.substr(1, text.size() - 2), origin + " (grown)");
    return str_cat(line, ", grown from ", io::json_integer(event, "from_world", origin, 1, INT32_MAX), " (",
                   io::json_string(event, "trigger", origin), "), downtime ",
                   fixed(io::json_number(event, "downtime_s", origin), 2), " s");
  }
  // An array field as written, or "" when the record has none (no spares).
  const auto array = [&](const char* field) {
    const auto found = record.find(field);
    const auto* text = found == record.end() ? nullptr : std::get_if<io::JsonText>(&found->second);
    return text ? text->text : std::string();
  };
  const std::string lost = array("lost"), replaced = array("replaced"), spares_lost = array("spares_lost");
  return str_cat(line, ", lost ", lost.empty() ? std::string("[]") : lost,
                 replaced.empty() || replaced == "[]" ? "" : ", replaced " + replaced,
                 spares_lost.empty() || spares_lost == "[]" ? "" : ", spares lost " + spares_lost);
}

}  // namespace

int rank_scores_report(const std::string& run_dir) {
  const std::string path = run_dir + "/metrics.jsonl";
  const std::vector<io::JsonObject> records = io::read_jsonl(path);
  std::vector<RankSummary> ranks;
  std::vector<std::string> membership;  // the world's changes, in order
  int64_t points = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const std::string origin = str_cat(path, ":", i + 1);
    const auto kind = io::json_optional_string(records[i], "kind");
    if (kind == "rank_scores") {
      ++points;
      for (int p = 0; p < train::kScoredPhases; ++p) {
        const char* phase = train::scored_phase_name(p);
        const auto it = records[i].find(phase);
        const auto* scores = it == records[i].end() ? nullptr : std::get_if<std::vector<double>>(&it->second);
        if (!scores) throw InputError(str_cat(origin, ": field '", phase, "' must be an array of per-rank scores"));
        if (ranks.size() < scores->size()) ranks.resize(scores->size());
        for (size_t r = 0; r < scores->size(); ++r) {
          RankSummary& rank = ranks[r];
          rank.sum[p] += (*scores)[r];
          if ((*scores)[r] < rank.lowest) {
            rank.lowest = (*scores)[r];
            rank.lowest_phase = phase;
          }
        }
      }
      for (auto& rank : ranks) ++rank.points;
    } else if (kind == "straggler") {
      const auto r = static_cast<size_t>(io::json_integer(records[i], "rank", origin, 0, (int64_t{1} << 20) - 1));
      if (ranks.size() <= r) ranks.resize(r + 1);
      ++ranks[r].flagged;
      ranks[r].host = io::json_optional_string(records[i], "host").value_or("");
    } else if (kind == "membership") {
      membership.push_back(membership_line(records[i], origin));
    }
  }
  if (!membership.empty()) {
    chief_print(str_cat("membership changes (", membership.size(), "):"));
    for (const std::string& line : membership) chief_print(line);
  }
  if (points == 0) {
    chief_print(str_cat("no straggler scores in ", path, " (they are recorded at every log point of a run with "
                        "more than one rank)"));
    return 0;
  }
  chief_print(str_cat("straggler scores per rank over ", points,
                      " log points (median rank's compute time / the rank's; 1 = typical, below "
                      "straggler.threshold = slow)"));
  std::string header = "  rank";
  for (int p = 0; p < train::kScoredPhases; ++p) header += str_cat("  ", train::scored_phase_name(p));
  chief_print(header + "  lowest (phase)  straggler records  host");
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankSummary& rank = ranks[r];
    std::string row = str_cat("  ", r);
    for (int p = 0; p < train::kScoredPhases; ++p)
      row += str_cat("  ", fixed(rank.sum[p] / static_cast<double>(std::max<int64_t>(rank.points, 1)), 2));
    row += str_cat("  ", rank.points ? fixed(rank.lowest, 2) : std::string("-"), " (", rank.lowest_phase, ")  ",
                   rank.flagged, "  ", rank.host.empty() ? "-" : rank.host);
    chief_print(row);
  }
  return 0;
}

}  // namespace mirrored::cli
