#pragma once
// Where every rank of the job runs: host, local rank on that host, node index, device.
// Built collectively (an all-gather of host names), so every rank holds the whole table.
#include <array>
#include <string>
#include <vector>

#include "mirrored/comm/communicator.h"
#include "mirrored/runtime/launcher.h"

namespace mirrored::runtime {

struct RankPlacement {
  int rank = 0;
  std::string host;
  int local_rank = 0;   // index among the ranks on the same host
  int node = 0;         // index of the host, in order of first appearance
  std::string device;   // "cpu", "cuda:0"
};

class Cluster {
 public:
  // Collective over `world`. The local rank comes from the host-name all-gather, unless
  // MIRRORED_LOCAL_RANK overrides it (launchers that pin ranks themselves). Under srun the
  // Slurm task variables are cross-checked: a task count that differs from the MPI world
  // (srun without --mpi=pmix starts N separate one-rank jobs) is an error, and Slurm's
  // node and local ids win over host names that disagree (containers sharing a name).
  static Cluster discover(comm::Communicator& world);
  static Cluster discover(comm::Communicator& world, const LauncherEnv& launcher);

  // The table from every rank's host name and, under srun, every rank's {SLURM_NODEID,
  // SLURM_LOCALID} (empty otherwise). Where the two disagree Slurm wins and *note says how.
  static Cluster assemble(int my_rank, const std::vector<std::string>& hosts,
                          const std::vector<std::array<int32_t, 2>>& slurm_node_local, std::string* note);

  // The table of a world rebuilt after a shrink, from what every rank learned at start-up
  // (hosts, devices, MIRRORED_LOCAL_RANK overrides, by world rank; an override of -1:
  // none): no communication, where discover() would gather it all again over TCP. Nodes
  // and local ranks by host name, as discover() without Slurm's variables.
  static Cluster from_members(int my_rank, const std::vector<std::string>& hosts,
                              const std::vector<std::string>& devices, const std::vector<int32_t>& local_rank_overrides);

  // MIRRORED_LOCAL_RANK, or -1 when unset (throws InputError when it is no count).
  static int local_rank_override();

  int rank() const { return rank_; }
  int world_size() const { return static_cast<int>(placements_.size()); }
  int local_rank() const { return placements_.at(static_cast<size_t>(rank_)).local_rank; }
  int local_size() const;
  int node() const { return placements_.at(static_cast<size_t>(rank_)).node; }
  int num_nodes() const { return num_nodes_; }
  bool is_chief() const { return rank_ == 0; }
  const std::string& host() const { return placements_.at(static_cast<size_t>(rank_)).host; }
  const std::vector<RankPlacement>& placements() const { return placements_; }

  // Collective: records every rank's device in the table.
  void gather_devices(comm::Communicator& world, const std::string& my_device);
  // "launcher: ..." then "rank  host  local_rank  node  device" rows, one per rank.
  std::string table() const;

 private:
  int rank_ = 0;
  int num_nodes_ = 1;
  std::string launcher_ = "none (one process)";
  std::vector<RankPlacement> placements_;
};

}  // namespace mirrored::runtime
