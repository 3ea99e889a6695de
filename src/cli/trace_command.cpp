// mirrored trace RUN_DIR
//
// Merges the flight recorder's dumps (RUN_DIR/trace/rank-<r>.jsonl, written on a collective
// timeout, a fatal error or SIGUSR2) and prints the verdict first: which ranks did not join
// which collective, which ranks ran a different collective at the same sequence number, or
// that every rank waits in the same one. Then one line per rank, and where each dump came from.
#include <charconv>
#include <climits>
#include <cmath>
#include <filesystem>
#include <map>
#include <regex>

#include "commands.h"
#include "parse_options.h"
#include "mirrored/comm/health/collective_verdict.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/core/strings.h"
#include "mirrored/io/jsonl_reader.h"

namespace mirrored::cli {
namespace {

// Ranks and world sizes a dump may name: more than any job runs, few enough to index by.
constexpr int64_t kMaxRanks = int64_t{1} << 20;

uint64_t hex_fingerprint(const std::string& text, const std::string& origin) {
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
  if (text.empty() || error != std::errc() || end != text.data() + text.size())
    throw InputError(str_cat(origin, ": field 'fingerprint' = \"", text, "\": expected up to 16 hex digits"));
  return value;
}

comm::CollectiveRecord record_from(const io::JsonObject& line, const std::string& origin) {
  comm::CollectiveRecord r;
  r.sequence = static_cast<uint64_t>(io::json_integer(line, "seq", origin, 0, INT64_MAX));
  r.communicator = io::json_string(line, "comm", origin);
  r.operation = io::json_string(line, "op", origin);
  r.count = static_cast<uint64_t>(io::json_integer(line, "count", origin, 0, INT64_MAX));
  r.type = io::json_string(line, "dtype", origin);
  r.site = io::json_string(line, "site", origin);
  r.fingerprint = hex_fingerprint(io::json_string(line, "fingerprint", origin), origin);
  r.start_us = io::json_integer(line, "start_us", origin, 0, INT64_MAX);
  r.end_us = io::json_integer(line, "end_us", origin, 0, INT64_MAX);
  return r;
}

struct Dump {
  comm::RankTrace trace;
  int world = 0;
};

Dump read_dump(const std::string& path) {
  const std::vector<io::JsonObject> lines = io::read_jsonl(path);
  if (lines.empty() || io::json_optional_string(lines[0], "kind") != "trace")
    throw InputError(str_cat(path, ": not a flight recorder dump (its first line must be {\"kind\": \"trace\", ...})"));
  const std::string header = path + ":1";
  Dump dump;
  dump.trace.present = true;
  dump.trace.rank = static_cast<int>(io::json_integer(lines[0], "rank", header, 0, kMaxRanks - 1));
  dump.world = static_cast<int>(io::json_integer(lines[0], "world", header, 1, kMaxRanks));
  dump.trace.host = io::json_optional_string(lines[0], "host").value_or("");
  dump.trace.reason = io::json_optional_string(lines[0], "reason").value_or("");
  dump.trace.step = io::json_integer(lines[0], "step", header, -1, INT64_MAX);
  if (const auto it = lines[0].find("silent"); it != lines[0].end())
    if (const auto* ranks = std::get_if<std::vector<double>>(&it->second))
      for (const double r : *ranks) {
        if (!(r >= 0 && r < static_cast<double>(kMaxRanks)) || r != std::floor(r))
          throw InputError(str_cat(header, ": field 'silent' holds ", r, ", expected rank numbers"));
        dump.trace.silent.push_back(static_cast<int>(r));
      }
  for (size_t i = 1; i < lines.size(); ++i) dump.trace.records.push_back(record_from(lines[i], str_cat(path, ":", i + 1)));
  return dump;
}

}  // namespace

int trace_command(const Args& args) {
  namespace po = boost::program_options;
  po::options_description desc(
      "usage: mirrored trace RUN_DIR\n"
      "The verdict on a stuck or failed job from its flight recorder dumps (RUN_DIR/trace/rank-<r>.jsonl,\n"
      "written on a collective timeout, a fatal error or SIGUSR2), first line; then one line per rank.\noptions");
  desc.add_options()("help,h", "print this help")("run_dir", po::value<std::string>(), "the run directory (--out)");
  po::positional_options_description positional;
  positional.add("run_dir", 1);
  po::variables_map values;
  if (!parse_options(args, desc, &positional, values, "trace")) return 0;
  if (!values.count("run_dir")) throw InputError("trace: a run directory is needed (mirrored trace RUN_DIR)", ExitCode::kUsage);
  const std::string directory = values["run_dir"].as<std::string>() + "/trace";
  if (!std::filesystem::is_directory(directory))
    throw InputError(str_cat("trace: '", directory, "' does not exist: the run left no flight recorder dumps "
                             "(they are written on a collective timeout, a fatal error or SIGUSR2)"));
  std::map<int, Dump> dumps;
  int world = 0;
  const std::regex name(R"(rank-(\d+)\.jsonl)");
  for (const auto& entry : std::filesystem::directory_iterator(directory)) {
    if (!std::regex_match(entry.path().filename().string(), name)) continue;
    Dump dump = read_dump(entry.path().string());
    world = std::max(world, dump.world);
    dumps[dump.trace.rank] = std::move(dump);
  }
  if (dumps.empty()) throw InputError(str_cat("trace: '", directory, "' holds no rank-<r>.jsonl dumps"));
  std::vector<comm::RankTrace> ranks(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) ranks[static_cast<size_t>(r)].rank = r;
  std::vector<std::string> sources;
  for (auto& [rank, dump] : dumps) {
    if (rank < 0 || rank >= world) continue;
    sources.push_back(str_cat("rank ", rank, " (", dump.trace.reason, ", ", dump.trace.records.size(), " collectives)"));
    ranks[static_cast<size_t>(rank)] = std::move(dump.trace);
  }
  const comm::Verdict verdict = comm::trace_verdict(ranks);
  chief_print(verdict.headline);
  for (const auto& line : verdict.details) chief_print("  " + line);
  chief_print(str_cat("dumps: ", join(sources, ", "), " of ", world, " rank(s), in ", directory));
  return 0;
}

}  // namespace mirrored::cli
