// mirrored ps RUN_DIR: where each rank of a run's current world runs, from the run's
// ranks.jsonl (train/rank_table.h): rank, host, pid, the pid of its rank-agent (on_failure =
// shrink launches start each rank through one, so a rank shows twice in `ps`), and its
// state as seen from here: running or gone for a rank on this host; a rank on another host
// is not checked (ssh to it).
#include <boost/program_options.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "commands.h"
#include "parse_options.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/core/strings.h"
#include "mirrored/io/jsonl_reader.h"
#include "mirrored/train/rank_table.h"

namespace mirrored::cli {
namespace {

std::string this_host() {
  char name[256] = {};
  return ::gethostname(name, sizeof(name) - 1) == 0 ? std::string(name) : std::string();
}

// A process of this host is the rank when it still runs mirrored (a pid reused by another
// program is not).
std::string local_state(int64_t pid) {
  std::ifstream comm(str_cat("/proc/", pid, "/comm"));
  std::string name;
  if (!comm || !std::getline(comm, name)) return "gone";
  return name == "mirrored" ? "running" : "gone (pid now " + name + ")";
}

}  // namespace

int ps_command(const Args& args) {
  namespace po = boost::program_options;
  po::options_description desc(
      "usage: mirrored ps RUN_DIR\n"
      "Each rank of a run's current world: rank, host, pid, the pid of its rank-agent (on_failure = shrink),\n"
      "state (checked on this host only), from RUN_DIR/ranks.jsonl.\noptions");
  desc.add_options()("help,h", "print this help")("run_dir", po::value<std::string>(), "the run directory (--out)");
  po::positional_options_description positional;
  positional.add("run_dir", 1);
  po::variables_map values;
  if (!parse_options(args, desc, &positional, values, "ps")) return 0;
  if (!values.count("run_dir")) throw InputError("ps: a run directory is needed (mirrored ps RUN_DIR)", ExitCode::kUsage);
  const std::string path = (std::filesystem::path(values["run_dir"].as<std::string>()) / train::kRankTableFile).string();
  if (!std::filesystem::exists(path))
    throw InputError(str_cat("ps: '", path, "' does not exist: the run has not begun training (ranks.jsonl is written "
                             "when it does)"),
                     ExitCode::kUsage);
  const std::vector<io::JsonObject> records = io::read_jsonl(path);
  const std::string here = this_host();
  chief_print("rank  host  pid  agent_pid  state");
  for (size_t i = 0; i < records.size(); ++i) {
    const std::string origin = str_cat(path, ":", i + 1);
    const int64_t rank = io::json_integer(records[i], "rank", origin, 0, INT32_MAX);
    const std::string host = io::json_string(records[i], "host", origin);
    const int64_t pid = io::json_integer(records[i], "pid", origin, 1, INT32_MAX);
    const int64_t agent = io::json_integer(records[i], "agent_pid", origin, 0, INT32_MAX);
    const std::string state = host == here ? local_state(pid) : str_cat("not checked (on ", host, ")");
    chief_print(str_cat(rank, "  ", host, "  ", pid, "  ", agent ? std::to_string(agent) : std::string("-"), "  ", state));
  }
  return 0;
}

}  // namespace mirrored::cli
