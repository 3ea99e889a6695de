#include "mirrored/distribute/cluster.h"

#include <algorithm>
#include <cstdlib>
#include <iomanip>
#include <map>
#include <sstream>

#include "mirrored/core/error.h"
#include "mirrored/core/process.h"

namespace mirrored::distribute {
namespace {
int local_rank_override() {
  const char* value = std::getenv("MIRRORED_LOCAL_RANK");
  if (!value || !*value) return -1;
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  if (*end != '\0' || parsed < 0)
    throw InputError(str_cat("MIRRORED_LOCAL_RANK='", value, "': expected a non-negative integer"),
                     ExitCode::kUsage);
  return static_cast<int>(parsed);
}
}  // namespace

Cluster Cluster::discover(comm::Communicator& world) {
  Cluster cluster;
  cluster.rank_ = world.rank();
  const auto hosts = world.allgather_strings(local_hostname());
  std::map<std::string, int> node_of_host, ranks_seen_on_host;
  for (int r = 0; r < world.size(); ++r) {
    const std::string& host = hosts[static_cast<size_t>(r)];
    auto [it, inserted] = node_of_host.emplace(host, static_cast<int>(node_of_host.size()));
    RankPlacement placement;
    placement.rank = r;
    placement.host = host;
    placement.node = it->second;
    placement.local_rank = ranks_seen_on_host[host]++;
    placement.device = "cpu";
    cluster.placements_.push_back(placement);
  }
  cluster.num_nodes_ = static_cast<int>(node_of_host.size());
  const int overridden = local_rank_override();
  if (overridden >= 0) cluster.placements_[static_cast<size_t>(cluster.rank_)].local_rank = overridden;
  // Everyone learns the overrides too, so the table is the same on every rank.
  const auto local_ranks = world.allgather_value<int32_t>(cluster.local_rank());
  for (size_t r = 0; r < local_ranks.size(); ++r) cluster.placements_[r].local_rank = local_ranks[r];
  return cluster;
}

int Cluster::local_size() const {
  const std::string& mine = host();
  return static_cast<int>(std::count_if(placements_.begin(), placements_.end(),
                                        [&](const RankPlacement& p) { return p.host == mine; }));
}

void Cluster::gather_devices(comm::Communicator& world, const std::string& my_device) {
  const auto devices = world.allgather_strings(my_device);
  for (size_t r = 0; r < devices.size(); ++r) placements_[r].device = devices[r];
}

std::string Cluster::table() const {
  size_t host_width = 4;
  for (const auto& p : placements_) host_width = std::max(host_width, p.host.size());
  std::ostringstream out;
  out << std::left << std::setw(6) << "rank" << std::setw(static_cast<int>(host_width) + 2) << "host"
      << std::setw(12) << "local_rank" << std::setw(6) << "node" << "device";
  for (const auto& p : placements_) {
    out << "\n"
        << std::left << std::setw(6) << p.rank << std::setw(static_cast<int>(host_width) + 2) << p.host
        << std::setw(12) << p.local_rank << std::setw(6) << p.node << p.device;
  }
  return out.str();
}

}  // namespace mirrored::distribute
