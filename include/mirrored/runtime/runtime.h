#pragma once
// The one distributed context: it owns MPI's lifetime, the cluster table, this rank's
// device and every communicator of the job: the world (host values), the gradient
// communicators (flat, or hierarchical with its node and leader levels) and, when the
// device is a GPU, the one NCCL communicator. It tears them down in a fixed order (see
// ~Runtime). Nothing else calls MPI_Init or ncclCommInitRank.
#include <mpi.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mirrored/comm/communicator.h"
#include "mirrored/comm/health/watchdog.h"
#include "mirrored/comm/hierarchical_communicator.h"
#include "mirrored/core/device.h"
#include "mirrored/core/error.h"
#include "mirrored/kernels/device_context.h"
#include "mirrored/runtime/cluster.h"
#include "mirrored/runtime/core_binding.h"

namespace mirrored::runtime {

enum class Launch {
  kAuto,   // MPI when started by mpirun/srun (launcher variables present), else local
  kMpi,
  kLocal,  // a world of one, no MPI
};

enum class DeviceChoice { kAuto, kCpu, kCuda };

// How gradients are all-reduced across replicas.
enum class Allreduce {
  kAuto,          // hierarchical when the job spans several nodes with several ranks on one
  kFlat,          // one all-reduce over every rank
  kHierarchical,  // reduce in each node, all-reduce among node leaders, broadcast in each node
};

struct RuntimeOptions {
  Launch launch = Launch::kAuto;
  DeviceChoice device = DeviceChoice::kCpu;
  bool print_cluster_table = false;
  // A blocking collective that takes longer aborts the job (exit 5), naming the ranks that
  // did not arrive; with survive_failures the watchdog revokes instead, and the survivors
  // shrink past the silent ranks (on_timeout()). <= 0: wait forever.
  double collective_timeout_s = 300.0;
  // Each rank's threads on cores of their own unless the launcher bound them
  // (core_binding.h); kOff leaves the process mask alone.
  BindCores bind_cores = BindCores::kAuto;
  // false: no NCCL communicator even on a GPU, for programs that only report (mirrored
  // info), so a NCCL that cannot start in this runtime does not stop them.
  bool device_communicator = true;
  // The flight recorder's ring: the last this many collectives of each rank, dumped to
  // <out>/trace on a timeout, a fatal error or SIGUSR2 (comm/health/flight_recorder.h). 0: off.
  size_t trace_collectives = 2000;
  // on_failure = shrink: a lost peer raises comm::PeerFailure from the collective that saw
  // it (instead of ending the job), and the membership primitives (revoke_communicators,
  // shrink_job, rebuild_communicators) let the survivors go on.
  // Needs ULFM (comm/failure/fault_tolerance.h); refused at start-up, naming it, where it is missing.
  bool survive_failures = false;
  // Hot spares (survive_failures only): the highest `spares` ranks the launcher started
  // wait as spares instead of training; the world is the ranks below them. A spare holds
  // no replica and waits on the job channel (wait_as_spare()) until training ends or a
  // loss makes the owner of membership call it into the world (rebuild_communicators).
  int spares = 0;
};

class JobChannel;

// A process of the job, as the owner of membership (elastic/) needs to know it.
struct JobMember {
  int64_t pid = 0;           // its process id on `host`
  std::string host;
  int first_world_rank = 0;  // its rank in the world the launcher started (the launcher's name for it)
  std::string device;        // "cpu", "cuda:0": chosen at start-up, kept for the process's life
  int local_rank_override = -1;  // MIRRORED_LOCAL_RANK of that process; -1: none
};

// The job after Runtime::shrink_job(): its live ranks, in their old order.
struct ShrunkJob {
  int size_before = 0;             // ranks in the job before the shrink
  int rank = 0;                    // this process's rank in the shrunk job
  std::vector<int> previous_rank;  // per rank of the shrunk job: its rank in the job before
  int size() const { return static_cast<int>(previous_rank.size()); }
};

class Runtime {
 public:
  Runtime(int& argc, char**& argv, RuntimeOptions options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Host buffers (scalars, strings, loss sums): MPI, or a world of one.
  comm::Communicator& world() { return *world_; }
  // The MPI collectives' watchdog and flight recorder; nullptr without MPI.
  comm::CollectiveWatchdog* watchdog() { return watchdog_.get(); }
  // Buffers on device(): NCCL when the device is a GPU, otherwise the world communicator.
  comm::Communicator& device_communicator() { return device_comm_ ? *device_comm_ : *world_; }
  // The communicator gradient reducers use, for `how` (kFlat or kHierarchical; kAuto is
  // resolved by the strategy). On a GPU, the NCCL communicator whatever `how` says (NCCL
  // arranges its own rings and trees). On CPUs, a communicator of its own, so a reducer's
  // communication thread never mixes traffic with the world's; created on first request
  // (collective), then the same one. The hierarchical one groups ranks by shared memory
  // (MPI_COMM_TYPE_SHARED) and is watched like world().
  comm::Communicator& gradient_communicator(Allreduce how);
  // Nodes of the hierarchical gradient communicator (after gradient_communicator(kHierarchical)
  // on CPUs; 0 before).
  int hierarchical_nodes() const;
  const Cluster& cluster() const { return cluster_; }
  const CoreBinding& core_binding() const { return core_binding_; }
  Device device() const { return device_; }
  bool uses_mpi() const { return owns_mpi_; }
  // Open MPI's nonblocking all-reduce algorithm in force (comm/mpi_tuning.h); empty
  // without MPI.
  const std::string& nonblocking_allreduce_algorithm() const { return nonblocking_allreduce_; }
  int rank() const { return cluster_.rank(); }
  int world_size() const { return cluster_.world_size(); }

  // Membership primitives (survive_failures only). The owner of membership
  // (elastic/elastic_run.h) decides who was lost, what happens to them and which ranks train
  // in which order; these only carry it out. The job communicator holds every process of
  // the job; the world and every communicator built over it, the ranks that train.
  //
  // Revokes every communicator the job tracks (comm/failure/fault_tolerance.h), so that no
  // rank stays blocked in one.
  void revoke_communicators();
  // Collective over the live ranks of the job, after a comm::PeerFailure: shrinks the job
  // communicator to them (their order kept: MPIX_Comm_shrink, then MPIX_Comm_agree) and
  // says who survived; job_members() follows the shrunk job from then on. When ranks are
  // gone, `when_ranks_lost` runs at once, as soon as the survivors have agreed, before
  // anything else (the owner's answer to a loss that cannot wait: the MPI runtime ends a
  // job that lost a node's daemon within half a second). The world and every communicator
  // over it stay revoked (and the old watchdog runs) until rebuild_communicators(), which
  // is the only call to make in between.
  ShrunkJob shrink_job(const std::function<void()>& when_ranks_lost = {});
  // Collective over the job, after shrink_job(): frees the revoked communicators and builds
  // the world over the job ranks `world`, in that order (world rank i is job rank
  // world[i]), with the watchdog's communicator, the cluster table and, on GPUs, the NCCL
  // communicator (a fresh bootstrap); gradient communicators are built on their next
  // request. References to the old communicators are invalid afterwards: whoever held one
  // (a strategy, a reducer) is rebuilt too. `world` must list every job rank in job order
  // (a world that leaves ranks of the job out, or orders them otherwise, is refused).
  void rebuild_communicators(const std::vector<int>& world);
  // Every process of the job by job rank (survive_failures only; empty otherwise).
  std::vector<JobMember> job_members() const;
  // The job ranks that train, in world order: world rank i is job rank training_ranks()[i]
  // (survive_failures only; empty otherwise). The other job ranks are spares.
  const std::vector<int>& training_ranks() const { return training_ranks_; }
  // This process waits as a spare: it is in the job but not in the world.
  bool is_spare() const { return spare_; }

  // The job channel (RuntimeOptions::spares > 0; comm/failure's revoke reaches it): every
  // process of the job listens on it, so a spare hears of every loss and the training
  // ranks hear of a lost spare. Throws comm::PeerFailure when a process of the job failed;
  // false without spares.
  bool poll_job_channel();
  // A spare's wait, at under 1% of a core: returns when the chief announced the end of
  // training; throws comm::PeerFailure on a loss anywhere in the job.
  void wait_as_spare();
  // The chief, once training ended: every spare of the job is told (and returns from
  // wait_as_spare()). Nothing without spares.
  void announce_end_to_spares();

  // The status this process is about to exit with. After a shrink, Open MPI 5.0's
  // MPI_Finalize can wait for ever on the ranks the job lost (its closing fence counts
  // them, more often when several died together): the destructor then gives it
  // collective_timeout_s (5 to 30 s), or until mpirun's daemon is gone (this process
  // orphaned), and exits with this status if it has not returned.
  void set_exit_status(int status) { exit_status_ = status; }

  // Ends every rank of the job with `code` (comm::abort_job: MPI_Abort when MPI is up,
  // exit() otherwise). Safe to call without a Runtime (before or after one existed).
  [[noreturn]] static void abort_job(ExitCode code);
  // Ends this rank after an error every rank reached alike (comm::end_job_alike: MPI
  // finalised, exit with `code`, no MPI_Abort); `unprinted` is printed if a peer never
  // joins (this rank left the message to rank 0).
  [[noreturn]] static void end_job_alike(ExitCode code, const std::string& unprinted);

  static bool launched_by_mpi();  // launcher variables (Open MPI, PMIx, PMI, Slurm srun)
  // Before MPI starts: the rank and world size the launcher announced, so errors raised
  // while parsing the command line already say which rank they come from.
  static void identify_from_launcher();

 private:
  // Steps of the constructor (runtime.cpp), in the order it takes them.
  // MPI_Init with what must precede and follow it, the watchdog, the world communicator.
  void start_mpi_world(int& argc, char**& argv, const LauncherEnv& launcher);
  // The collective watchdog over job_comm_, told which process launched this rank.
  void start_watchdog(const LauncherEnv& launcher);
  // survive_failures: every rank's process id and launcher rank (pids_, first_world_ranks_).
  void remember_rank_processes();
  // The cluster table, and the watchdog told every rank's host.
  void discover_cluster(const LauncherEnv& launcher);
  // survive_failures: every process's device and local-rank override, over the whole job
  // (spares included), so a rebuilt world's cluster table needs no communication.
  void remember_rank_placements();
  // This process's name in logs: its world rank, or a spare's job rank.
  void identify_process();

  // Spares: the world's communicator over the training ranks of job_comm_, in the order
  // `training` gives (job ranks), or, on a spare, the spares' own; from MPI_Comm_split.
  void split_world(const std::vector<int>& training);
  MPI_Comm world_comm() const { return world_base_ != MPI_COMM_NULL ? world_base_ : job_comm_; }
  void exit_if_finalize_hangs() const;
  void free_job_communicator(MPI_Comm& comm);
  // What the watchdog does at a collective timeout: with survive_failures, revoke (the
  // survivors shrink past the silent ranks); otherwise abort the job.
  comm::CollectiveWatchdog::OnTimeout on_timeout() const {
    return survive_failures_ ? comm::CollectiveWatchdog::OnTimeout::kRevoke : comm::CollectiveWatchdog::OnTimeout::kAbort;
  }

  bool owns_mpi_ = false;
  bool survive_failures_ = false;
  double collective_timeout_s_ = 0.0;
  size_t trace_collectives_ = 0;
  bool wants_device_communicator_ = true;
  int shrinks_ = 0;
  int exit_status_ = 0;
  // The job's communicator: MPI_COMM_WORLD, or the survivors' after a shrink (owned then;
  // tracked once rebuilt over, so a failure revokes it too).
  MPI_Comm job_comm_ = MPI_COMM_NULL;
  // The job communicator a shrink replaced, freed with the communicators built over it.
  MPI_Comm replaced_job_comm_ = MPI_COMM_NULL;
  // survive_failures, by rank of job_comm_ at start-up: every rank's process id and its
  // rank in the world the launcher started (which names it in the launcher's variables).
  std::vector<int64_t> pids_;
  std::vector<int32_t> first_world_ranks_;
  std::vector<std::string> hosts_;  // survive_failures, by rank of job_comm_ at start-up
  std::vector<std::string> devices_;            // the same, each process's device
  std::vector<int32_t> local_rank_overrides_;   // the same, MIRRORED_LOCAL_RANK or -1
  // Spares: how many the job started with, the job ranks that train (world order), whether
  // this process is a spare, the communicator the world is built over (a split of
  // job_comm_; MPI_COMM_NULL when the world is the whole job) and the job channel.
  int spares_ = 0;
  std::vector<int> training_ranks_;
  bool spare_ = false;
  MPI_Comm world_base_ = MPI_COMM_NULL;
  std::unique_ptr<JobChannel> job_channel_;
  int32_t first_world_rank_ = 0;
  // From the first shrink on: every process of the job, by job rank.
  std::vector<JobMember> members_;
  int64_t launcher_daemon_ = 0;  // the parent that launched this rank (mpirun's daemon); 0: none
  std::string nonblocking_allreduce_;
  Cluster cluster_;
  CoreBinding core_binding_;
  Device device_;
  // Communicators, torn down in the reverse of this order by ~Runtime (explicitly, since
  // MPI must still be up and the watchdog still running when they are freed).
  std::unique_ptr<comm::CollectiveWatchdog> watchdog_;
  std::unique_ptr<comm::Communicator> world_;
  // CUDA devices only: the GPU's stream, library handles and plans. Destroyed after NCCL
  // (which queues work on its stream), before the MPI world.
  std::unique_ptr<kernels::DeviceContext> device_context_;
  std::unique_ptr<comm::Communicator> device_comm_;  // CUDA devices only: NCCL, or local in a world of one
  std::unique_ptr<comm::Communicator> flat_gradients_;         // created on first request
  std::unique_ptr<comm::HierarchicalCommunicator> hierarchical_gradients_;
};

}  // namespace mirrored::runtime
