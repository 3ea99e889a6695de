#include "mirrored/runtime/cluster.h"

#include <algorithm>
#include <cstdlib>
#include <iomanip>
#include <map>
#include <sstream>

#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/core/process.h"

namespace mirrored::runtime {
int Cluster::local_rank_override() {
  const char* value = std::getenv("MIRRORED_LOCAL_RANK");
  if (!value || !*value) return -1;
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  if (*end != '\0' || parsed < 0)
    throw InputError(str_cat("MIRRORED_LOCAL_RANK='", value, "': expected a non-negative integer"),
                     ExitCode::kUsage);
  return static_cast<int>(parsed);
}

Cluster Cluster::discover(comm::Communicator& world) {
  return discover(world, LauncherEnv::from_environment());
}

Cluster Cluster::discover(comm::Communicator& world, const LauncherEnv& launcher) {
  if (launcher.slurm_task && launcher.slurm_step_tasks >= 0 && launcher.slurm_step_tasks != world.size())
    throw Error(ExitCode::kUsage,
                str_cat("srun started ", launcher.slurm_step_tasks, " tasks, but this one sees an MPI world of ",
                        world.size(), ": the tasks did not join one MPI job. Launch with `srun --mpi=pmix` (Open "
                        "MPI built with PMIx), or with mpirun inside the allocation (slurm/train.sbatch)"));
  if (launcher.slurm_task && launcher.slurm_procid >= 0 && launcher.slurm_procid != world.rank())
    rank_warning(str_cat("SLURM_PROCID=", launcher.slurm_procid, " but MPI rank ", world.rank(),
                         ": Slurm and MPI number the tasks differently"));
  const auto hosts = world.allgather_strings(local_hostname());
  std::vector<std::array<int32_t, 2>> slurm_ids;
  if (launcher.slurm_task) {
    const std::array<int32_t, 2> mine = {launcher.slurm_nodeid, launcher.slurm_localid};
    slurm_ids.resize(static_cast<size_t>(world.size()));
    world.allgather(mine.data(), slurm_ids.data(), 2, comm::DataType::kI32);
  }
  std::string note;
  Cluster cluster = assemble(world.rank(), hosts, slurm_ids, &note);
  cluster.launcher_ = launcher.describe();
  if (!note.empty() && world.rank() == 0) rank_warning(note);
  const int overridden = local_rank_override();
  if (overridden >= 0) cluster.placements_[static_cast<size_t>(cluster.rank_)].local_rank = overridden;
  // Everyone learns the overrides too, so the table is the same on every rank.
  const auto local_ranks = world.allgather_value<int32_t>(cluster.local_rank());
  for (size_t r = 0; r < local_ranks.size(); ++r) cluster.placements_[r].local_rank = local_ranks[r];
  return cluster;
}

Cluster Cluster::assemble(int my_rank, const std::vector<std::string>& hosts,
                          const std::vector<std::array<int32_t, 2>>& slurm_node_local, std::string* note) {
  MIRRORED_CHECK(my_rank >= 0 && static_cast<size_t>(my_rank) < hosts.size(), "rank ", my_rank, " of ",
                 hosts.size());
  MIRRORED_CHECK(slurm_node_local.empty() || slurm_node_local.size() == hosts.size(), "slurm ids for ",
                 slurm_node_local.size(), " of ", hosts.size(), " ranks");
  Cluster cluster;
  cluster.rank_ = my_rank;
  // Nodes are numbered in order of first appearance, by host name or by SLURM_NODEID.
  std::map<std::string, int> node_of_host, ranks_seen_on_host;
  std::map<int32_t, int> node_of_slurm_id;
  std::vector<std::string> disagreements;
  for (size_t r = 0; r < hosts.size(); ++r) {
    RankPlacement placement;
    placement.rank = static_cast<int>(r);
    placement.host = hosts[r];
    placement.device = "cpu";
    auto host_node = node_of_host.emplace(hosts[r], static_cast<int>(node_of_host.size())).first->second;
    const int host_local = ranks_seen_on_host[hosts[r]]++;
    placement.node = host_node;
    placement.local_rank = host_local;
    if (!slurm_node_local.empty()) {
      const auto [slurm_node, slurm_local] = slurm_node_local[r];
      placement.node =
          node_of_slurm_id.emplace(slurm_node, static_cast<int>(node_of_slurm_id.size())).first->second;
      if (slurm_local >= 0) placement.local_rank = slurm_local;
      if (placement.node != host_node || placement.local_rank != host_local)
        disagreements.push_back(str_cat("rank ", r, " (host ", hosts[r], ": node ", host_node, " local ", host_local,
                                        "; Slurm: node ", placement.node, " local ", placement.local_rank, ")"));
    }
    cluster.placements_.push_back(placement);
  }
  cluster.num_nodes_ =
      static_cast<int>(slurm_node_local.empty() ? node_of_host.size() : node_of_slurm_id.size());
  if (note && !disagreements.empty()) {
    if (disagreements.size() > 4) disagreements.resize(4);
    *note = str_cat("host names and Slurm (SLURM_NODEID, SLURM_LOCALID) place ranks differently; using Slurm's: ",
                    join(disagreements, ", "));
  }
  return cluster;
}

Cluster Cluster::from_members(int my_rank, const std::vector<std::string>& hosts,
                              const std::vector<std::string>& devices,
                              const std::vector<int32_t>& local_rank_overrides) {
  MIRRORED_CHECK(devices.size() == hosts.size() && local_rank_overrides.size() == hosts.size(), "devices for ",
                 devices.size(), " and local-rank overrides for ", local_rank_overrides.size(), " of ", hosts.size(),
                 " ranks");
  Cluster cluster = assemble(my_rank, hosts, {}, nullptr);
  cluster.launcher_ = LauncherEnv{}.describe();  // the launcher's variables describe the world it started
  for (size_t r = 0; r < hosts.size(); ++r) {
    RankPlacement& placement = cluster.placements_[r];
    placement.device = devices[r];
    if (local_rank_overrides[r] >= 0) placement.local_rank = local_rank_overrides[r];
  }
  return cluster;
}

int Cluster::local_size() const {
  const int mine = node();
  return static_cast<int>(std::count_if(placements_.begin(), placements_.end(),
                                        [&](const RankPlacement& p) { return p.node == mine; }));
}

void Cluster::gather_devices(comm::Communicator& world, const std::string& my_device) {
  const auto devices = world.allgather_strings(my_device);
  for (size_t r = 0; r < devices.size(); ++r) placements_[r].device = devices[r];
}

std::string Cluster::table() const {
  size_t host_width = 4;
  for (const auto& p : placements_) host_width = std::max(host_width, p.host.size());
  std::ostringstream out;
  out << "launcher: " << launcher_ << ", " << world_size() << " rank(s) on " << num_nodes_ << " node(s)\n";
  out << std::left << std::setw(6) << "rank" << std::setw(static_cast<int>(host_width) + 2) << "host"
      << std::setw(12) << "local_rank" << std::setw(6) << "node" << "device";
  for (const auto& p : placements_) {
    out << "\n"
        << std::left << std::setw(6) << p.rank << std::setw(static_cast<int>(host_width) + 2) << p.host
        << std::setw(12) << p.local_rank << std::setw(6) << p.node << p.device;
  }
  return out.str();
}

}  // namespace mirrored::runtime
