#include "mirrored/train/rank_table.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "mirrored/core/file_replacement.h"
#include "mirrored/core/run_state.h"
#include "mirrored/core/strings.h"
#include "mirrored/io/jsonl_writer.h"

namespace mirrored::train {
namespace {

std::string this_host() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "?";
  return name;
}

}  // namespace

void record_ranks(comm::Communicator& comm, const checkpoint::RunDirectory& run_dir, bool write, int64_t step) {
  // The rank-agent names itself to its rank through MIRRORED_RANK_AGENT_FD; without it the
  // parent is Open MPI's daemon or a shell, not part of the rank.
  const int64_t agent = std::getenv("MIRRORED_RANK_AGENT_FD") ? static_cast<int64_t>(::getppid()) : 0;
  const std::string mine = str_cat(static_cast<int64_t>(::getpid()), " ", agent, " ", this_host());
  const std::vector<std::string> all = comm.allgather_strings(mine);
  if (!write) return;
  // Where `mirrored resize` finds the job (the chief's view; the directory itself is
  // checked when used).
  std::string state_dir = run_state_dir_path();
  if (!state_dir.empty()) {
    std::error_code ignored;
    const std::filesystem::path absolute = std::filesystem::absolute(state_dir, ignored);
    if (!absolute.empty()) state_dir = absolute.lexically_normal().string();
  }
  std::string text;
  for (size_t rank = 0; rank < all.size(); ++rank) {
    const std::string& entry = all[rank];
    const size_t first = entry.find(' '), second = entry.find(' ', first + 1);
    text += io::to_json({{"rank", static_cast<int64_t>(rank)},
                         {"host", entry.substr(second + 1)},
                         {"pid", static_cast<int64_t>(std::stoll(entry.substr(0, first)))},
                         {"agent_pid", static_cast<int64_t>(std::stoll(entry.substr(first + 1, second - first - 1)))},
                         {"world_size", static_cast<int64_t>(all.size())},
                         {"step", step},
                         {"run_state_dir", state_dir}}) +
            "\n";
  }
  replace_file(run_dir.file(kRankTableFile), text);
}

}  // namespace mirrored::train
