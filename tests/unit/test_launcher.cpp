// Launcher detection from environment variables, and the cluster table assembled from
// host names and Slurm's ids: the cases a multi-node job meets.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "mirrored/runtime/cluster.h"
#include "mirrored/runtime/launcher.h"

using mirrored::runtime::Cluster;
using mirrored::runtime::LauncherEnv;

namespace {
LauncherEnv read(const std::map<std::string, std::string>& env) {
  return LauncherEnv::read([&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}
}  // namespace

TEST(Launcher, SrunTaskReadsSlurmIds) {
  const auto env = read({{"SLURM_JOB_ID", "12"}, {"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "3"},
                         {"SLURM_LOCALID", "1"}, {"SLURM_NODEID", "1"}, {"SLURM_NTASKS", "8"},
                         {"SLURM_STEP_NUM_TASKS", "4"}, {"SLURM_JOB_NODELIST", "n[1-2]"}, {"PMIX_RANK", "3"}});
  EXPECT_EQ(env.kind, LauncherEnv::Kind::kSlurm);
  EXPECT_TRUE(env.slurm_task);
  EXPECT_EQ(env.slurm_procid, 3);
  EXPECT_EQ(env.slurm_localid, 1);
  EXPECT_EQ(env.slurm_nodeid, 1);
  EXPECT_EQ(env.slurm_step_tasks, 4) << "the step's task count, not the job's";
  EXPECT_EQ(env.describe(), "srun (Slurm job 12 step 0, 4 tasks on n[1-2])");
}

TEST(Launcher, MpirunInsideABatchJobIgnoresTheInheritedSlurmTaskIds) {
  // What every rank of `mpirun -np 2` inside sbatch sees (measured): SLURM_PROCID=0 on all.
  const auto env = read({{"SLURM_JOB_ID", "2"}, {"SLURM_PROCID", "0"}, {"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "0"},
                         {"SLURM_NTASKS", "2"}, {"SLURM_JOB_NODELIST", "vm"}, {"OMPI_COMM_WORLD_RANK", "1"},
                         {"OMPI_COMM_WORLD_SIZE", "2"}, {"PMIX_RANK", "1"}});
  EXPECT_EQ(env.kind, LauncherEnv::Kind::kOpenMpi);
  EXPECT_FALSE(env.slurm_task);
  EXPECT_EQ(env.slurm_procid, -1);
  EXPECT_EQ(env.describe(), "mpirun (Open MPI) inside Slurm job 2 on vm");
}

TEST(Launcher, MpirunsRanksPerNode) {
  EXPECT_EQ(read({{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "8"}}).mpirun_local_size, 8);
  EXPECT_EQ(read({{"OMPI_COMM_WORLD_RANK", "5"}}).mpirun_local_size, -1) << "not said: unknown";
  // Only mpirun's own variable counts: srun's tasks are not mpirun's ranks.
  EXPECT_EQ(read({{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}).mpirun_local_size,
            -1);
}

TEST(Launcher, BatchShellAndPlainProcess) {
  EXPECT_EQ(read({}).kind, LauncherEnv::Kind::kNone);
  EXPECT_EQ(read({}).describe(), "none (one process)");
  // The batch script itself: a job, no step, so not an srun task.
  const auto batch = read({{"SLURM_JOB_ID", "5"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}});
  EXPECT_FALSE(batch.slurm_task);
  EXPECT_EQ(read({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}}).kind, LauncherEnv::Kind::kPmi);
}

TEST(ClusterAssemble, HostNamesGiveNodesAndLocalRanks) {
  std::string note;
  const auto cluster = Cluster::assemble(2, {"a", "a", "b", "b", "c"}, {}, &note);
  EXPECT_EQ(cluster.num_nodes(), 3);
  EXPECT_EQ(cluster.node(), 1);
  EXPECT_EQ(cluster.local_rank(), 0);
  EXPECT_EQ(cluster.local_size(), 2);
  EXPECT_EQ(cluster.placements()[4].node, 2);
  EXPECT_TRUE(note.empty());
}

TEST(ClusterAssemble, SlurmIdsWinOverHostNamesThatCollide) {
  // Two nodes whose containers report the same host name: only Slurm can tell them apart.
  std::string note;
  const auto cluster = Cluster::assemble(3, {"box", "box", "box", "box"}, {{{7, 0}, {7, 1}, {9, 0}, {9, 1}}}, &note);
  EXPECT_EQ(cluster.num_nodes(), 2);
  EXPECT_EQ(cluster.node(), 1);
  EXPECT_EQ(cluster.local_rank(), 1);
  EXPECT_EQ(cluster.local_size(), 2);
  EXPECT_NE(note.find("rank 2"), std::string::npos) << note;
  EXPECT_NE(note.find("using Slurm's"), std::string::npos) << note;
}

TEST(ClusterAssemble, AgreeingSlurmIdsLeaveNoNote) {
  std::string note;
  const auto cluster = Cluster::assemble(0, {"n1", "n1", "n2"}, {{{0, 0}, {0, 1}, {1, 0}}}, &note);
  EXPECT_EQ(cluster.num_nodes(), 2);
  EXPECT_TRUE(note.empty()) << note;
}

TEST(ClusterFromMembers, RebuiltWorldKeepsDevicesAndOverrides) {
  // A spare on host c took rank 1's place: world order a, c, b; c's process pinned itself
  // to local rank 3 (MIRRORED_LOCAL_RANK) when it started.
  const auto cluster = Cluster::from_members(1, {"a", "c", "b", "a"}, {"cuda:0", "cuda:3", "cuda:0", "cuda:1"},
                                             {-1, 3, -1, -1});
  EXPECT_EQ(cluster.num_nodes(), 3);
  EXPECT_EQ(cluster.node(), 1);
  EXPECT_EQ(cluster.local_rank(), 3);
  EXPECT_EQ(cluster.host(), "c");
  EXPECT_EQ(cluster.placements()[1].device, "cuda:3");
  EXPECT_EQ(cluster.placements()[3].local_rank, 1);  // the second rank on host a
  EXPECT_EQ(cluster.placements()[3].node, 0);
  EXPECT_ANY_THROW(Cluster::from_members(0, {"a", "b"}, {"cpu"}, {-1, -1}));
}
