// mirrored resize RUN_DIR: asks the job training into RUN_DIR to grow back to its configured
// size (elastic/grow_back.h). The request goes where the job's launch script and ranks steer
// each other: the run-state directory its chief named in RUN_DIR/ranks.jsonl, whose file
// `resize` gets the line "command" (core/run_state.h: the directory must be this user's,
// mode 0700, no symlink; the file a plain one of this user that no one else may write). A job
// that lost ranks saves a checkpoint at the end of its current step and exits 11, and the
// launch script relaunches it at full size; a job at its full size ignores the request and
// says so in its output. One process; it starts no MPI.
#include <boost/program_options.hpp>

#include <filesystem>

#include "commands.h"
#include "parse_options.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/core/run_state.h"
#include "mirrored/core/strings.h"
#include "mirrored/io/jsonl_reader.h"
#include "mirrored/train/rank_table.h"

namespace mirrored::cli {
namespace {

// The chief's line of ranks.jsonl: its host and run-state directory.
struct ChiefRecord {
  std::string host;
  std::string state_dir;
};

ChiefRecord read_chief(const std::string& path) {
  if (!std::filesystem::exists(path))
    throw InputError(str_cat("resize: '", path, "' does not exist: the run has not begun training (ranks.jsonl is "
                             "written when it does)"),
                     ExitCode::kUsage);
  const std::vector<io::JsonObject> records = io::read_jsonl(path);
  if (records.empty()) throw InputError(str_cat("resize: '", path, "' lists no rank"), ExitCode::kUsage);
  const std::string origin = str_cat(path, ":1");
  ChiefRecord chief;
  chief.host = io::json_string(records[0], "host", origin);
  chief.state_dir = io::json_optional_string(records[0], "run_state_dir").value_or("");
  return chief;
}

}  // namespace

int resize_command(const Args& args) {
  namespace po = boost::program_options;
  po::options_description desc(
      "usage: mirrored resize RUN_DIR\n"
      "Asks the job training into RUN_DIR, when it has lost ranks (on_failure = shrink), to grow back to its\n"
      "configured size: it writes a checkpoint at the end of its current step and exits 11, and its launch\n"
      "script (launch/local.sh, launch/multinode.sh, the slurm/ scripts) relaunches it at full size, resuming\n"
      "from that checkpoint. A job at its full size ignores the request (its output says so). The same as\n"
      "`kill -URG` on the launch script.\noptions");
  desc.add_options()("help,h", "print this help")("run_dir", po::value<std::string>(), "the run directory (--out)");
  po::positional_options_description positional;
  positional.add("run_dir", 1);
  po::variables_map values;
  if (!parse_options(args, desc, &positional, values, "resize")) return 0;
  if (!values.count("run_dir"))
    throw InputError("resize: a run directory is needed (mirrored resize RUN_DIR)", ExitCode::kUsage);
  const std::string path = (std::filesystem::path(values["run_dir"].as<std::string>()) / train::kRankTableFile).string();
  const ChiefRecord chief = read_chief(path);
  if (chief.state_dir.empty())
    throw InputError(str_cat("resize: the job of '", path, "' has no run-state directory: it was not started by a "
                             "launch script (launch/local.sh, launch/multinode.sh, slurm/), and nothing would "
                             "relaunch it at full size"),
                     ExitCode::kUsage);
  if (!std::filesystem::exists(chief.state_dir))
    throw InputError(str_cat("resize: the job's run-state directory '", chief.state_dir, "' (", path,
                             ") is gone: the job has ended, or its chief runs on ", chief.host,
                             ", where that directory is (run mirrored resize there)"),
                     ExitCode::kUsage);
  const std::string problem = append_resize_request(chief.state_dir, "command");
  if (!problem.empty()) throw InputError(str_cat("resize: ", problem, "; nothing was asked"), ExitCode::kUsage);
  chief_print(str_cat("asked the job of ", values["run_dir"].as<std::string>(), " (chief on ", chief.host,
                      ") to grow back to its configured size: if it has lost ranks it writes a checkpoint at the "
                      "end of its current step and exits 11, and its launch script relaunches it; a job at full "
                      "size ignores the request"));
  return 0;
}

}  // namespace mirrored::cli
