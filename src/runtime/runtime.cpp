#include "mirrored/runtime/runtime.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <initializer_list>
#include <numeric>
#include <thread>

#include "mirrored/comm/failure/abort.h"
#include "mirrored/comm/failure/fault_tolerance.h"
#include "mirrored/comm/failure/mpi_check.h"
#include "mirrored/comm/failure/runtime_loss.h"
#include "mirrored/comm/hierarchical_communicator.h"
#include "mirrored/comm/local_communicator.h"
#include "mirrored/comm/mpi_communicator.h"
#include "mirrored/comm/mpi_tuning.h"
#include "mirrored/core/log.h"
#include "mirrored/core/process.h"
#include "mirrored/core/strings.h"
#include "mirrored/core/timer.h"
#include "mirrored/runtime/device_choice.h"
#include "device_agreement.h"
#include "device_bootstrap.h"
#include "job_channel.h"
#include "mpi_start.h"
#include "ulfm_switches.h"

#ifdef MIRRORED_WITH_CUDA
#include "mirrored/comm/nccl_communicator.h"
#endif

namespace mirrored::runtime {
namespace {
bool env_set(const char* name) {
  const char* value = std::getenv(name);
  return value && *value;
}
}  // namespace

bool Runtime::launched_by_mpi() {
  return env_set("OMPI_COMM_WORLD_SIZE") || env_set("PMIX_RANK") || env_set("PMI_RANK") ||
         env_set("PMI_SIZE");
}

void Runtime::identify_from_launcher() {
  auto read = [](std::initializer_list<const char*> names, int fallback) {
    for (const char* name : names)
      if (env_set(name)) return std::atoi(std::getenv(name));
    return fallback;
  };
  set_process_identity({read({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}, 0),
                        read({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}, 1), local_hostname()});
}

// The steps of the distributed bootstrap in their fixed order (DESIGN.md): MPI and the world
// communicator (or a world of one), this process's identity, the cluster table, core
// binding, the device every rank agrees on, then the GPU's context and NCCL over the world.
Runtime::Runtime(int& argc, char**& argv, RuntimeOptions options)
    : survive_failures_(options.survive_failures), collective_timeout_s_(options.collective_timeout_s),
      trace_collectives_(options.trace_collectives),
      wants_device_communicator_(options.device_communicator), spares_(options.spares) {
  MIRRORED_CHECK(spares_ == 0 || survive_failures_, "spares need survive_failures");
  // Before MPI_Init, which may add variables of its own.
  const LauncherEnv launcher = LauncherEnv::from_environment();
  if (resolve_launch(options.launch) == Launch::kMpi)
    start_mpi_world(argc, argv, launcher);
  else
    world_ = std::make_unique<comm::LocalCommunicator>();
  if (survive_failures_ && owns_mpi_) remember_rank_processes();
  identify_process();
  discover_cluster(launcher);
  core_binding_ = bind_cores(options.bind_cores, *world_, cluster_);
  device_ = choose_device(options.device, cluster_);
  if (options.device != DeviceChoice::kCpu) device_ = agree_on_devices(options.device, device_, *world_, cluster_);
  cluster_.gather_devices(*world_, device_.str());
  if (survive_failures_ && owns_mpi_) remember_rank_placements();
  if (device_.is_cuda()) {
    device_context_ = start_device_context(device_.index);
    if (wants_device_communicator_ && !spare_)  // a spare's NCCL comes when it is called in
      device_comm_ = start_device_communicator(*world_, device_.index, collective_timeout_s_, survive_failures_);
  }
  if (options.print_cluster_table) chief_info(cluster_.table());
  if (spares_ > 0) job_channel_ = std::make_unique<JobChannel>(job_comm_);
}

void Runtime::identify_process() {
  if (!spare_) {
    set_process_identity({world_->rank(), world_->size(), local_hostname()});
    return;
  }
  // A spare is named by its job rank: it has no rank in the world.
  int rank = 0, size = 0;
  MIRRORED_MPI_CHECK(MPI_Comm_rank(job_comm_, &rank));
  MIRRORED_MPI_CHECK(MPI_Comm_size(job_comm_, &size));
  set_process_identity({rank, size, local_hostname()});
}

void Runtime::start_mpi_world(int& argc, char**& argv, const LauncherEnv& launcher) {
  refuse_started_mpi();
  // What MPI reads at MPI_Init.
  nonblocking_allreduce_ = comm::choose_nonblocking_allreduce_algorithm();
  if (survive_failures_) switch_on_ulfm_before_mpi_init(collective_timeout_s_, launcher);
  init_mpi_thread_multiple(argc, argv);
  owns_mpi_ = true;
  job_comm_ = MPI_COMM_WORLD;
  if (survive_failures_) switch_on_ulfm_after_mpi_init(launcher);
  int job_size = 0;
  MIRRORED_MPI_CHECK(MPI_Comm_size(job_comm_, &job_size));
  if (spares_ >= job_size)
    throw InputError(str_cat("shrink.spares = ", spares_, " but the launcher started ", job_size,
                             " rank(s): start the ranks that train plus ", spares_,
                             " spare(s) (launch/local.sh --spares, mpirun -np N+spares)"),
                     ExitCode::kUsage);
  training_ranks_.resize(static_cast<size_t>(job_size - spares_));
  std::iota(training_ranks_.begin(), training_ranks_.end(), 0);
  if (spares_ > 0) split_world(training_ranks_);
  start_watchdog(launcher);
  world_ = std::make_unique<comm::MpiCommunicator>(world_comm(), watchdog_.get(), "world");
}

void Runtime::split_world(const std::vector<int>& training) {
  int job_rank = 0;
  MIRRORED_MPI_CHECK(MPI_Comm_rank(job_comm_, &job_rank));
  const auto at = std::find(training.begin(), training.end(), job_rank);
  spare_ = at == training.end();
  // Training ranks ordered as `training` says; spares among themselves by job rank.
  const int key = spare_ ? job_rank : static_cast<int>(at - training.begin());
  MIRRORED_MPI_CHECK(MPI_Comm_split(job_comm_, spare_ ? 1 : 0, key, &world_base_));
  MIRRORED_MPI_CHECK(MPI_Comm_set_errhandler(world_base_, MPI_ERRORS_RETURN));
  comm::track_communicator(world_base_);
}

void Runtime::start_watchdog(const LauncherEnv& launcher) {
  watchdog_ = std::make_unique<comm::CollectiveWatchdog>(world_comm(), collective_timeout_s_, trace_collectives_,
                                                         on_timeout());
  // Under mpirun this process's parent is Open MPI's daemon (prted, or mpirun itself), or
  // the rank agent it started in the rank's place.
  if (launcher.kind == LauncherEnv::Kind::kOpenMpi) launcher_daemon_ = static_cast<int64_t>(getppid());
  watchdog_->set_launcher_daemon(launcher_daemon_);
}

// Over the whole job (spares included), straight on MPI: the world may be only its trainers.
void Runtime::remember_rank_processes() {
  int rank = 0, size = 0;
  MIRRORED_MPI_CHECK(MPI_Comm_rank(job_comm_, &rank));
  MIRRORED_MPI_CHECK(MPI_Comm_size(job_comm_, &size));
  const auto pid = static_cast<int64_t>(getpid());
  pids_.resize(static_cast<size_t>(size));
  MIRRORED_MPI_CHECK(MPI_Allgather(&pid, 1, MPI_INT64_T, pids_.data(), 1, MPI_INT64_T, job_comm_));
  constexpr int kHostChars = 256;
  std::string mine = local_hostname();
  mine.resize(kHostChars - 1);
  std::vector<char> hosts(static_cast<size_t>(size) * kHostChars);
  MIRRORED_MPI_CHECK(MPI_Allgather(mine.c_str(), kHostChars, MPI_CHAR, hosts.data(), kHostChars, MPI_CHAR, job_comm_));
  for (int r = 0; r < size; ++r) hosts_.emplace_back(&hosts[static_cast<size_t>(r) * kHostChars]);
  first_world_rank_ = rank;
  for (int r = 0; r < size; ++r) first_world_ranks_.push_back(r);
}

void Runtime::remember_rank_placements() {
  int size = 0;
  MIRRORED_MPI_CHECK(MPI_Comm_size(job_comm_, &size));
  const int32_t override = Cluster::local_rank_override();
  local_rank_overrides_.resize(static_cast<size_t>(size));
  MIRRORED_MPI_CHECK(
      MPI_Allgather(&override, 1, MPI_INT32_T, local_rank_overrides_.data(), 1, MPI_INT32_T, job_comm_));
  constexpr int kDeviceChars = 32;  // "cuda:15"
  std::string mine = device_.str();
  mine.resize(kDeviceChars - 1);
  std::vector<char> devices(static_cast<size_t>(size) * kDeviceChars);
  MIRRORED_MPI_CHECK(
      MPI_Allgather(mine.c_str(), kDeviceChars, MPI_CHAR, devices.data(), kDeviceChars, MPI_CHAR, job_comm_));
  for (int r = 0; r < size; ++r) devices_.emplace_back(&devices[static_cast<size_t>(r) * kDeviceChars]);
}

void Runtime::discover_cluster(const LauncherEnv& launcher) {
  cluster_ = Cluster::discover(*world_, launcher);
  if (!watchdog_) return;
  std::vector<std::string> hosts;
  for (const auto& placement : cluster_.placements()) hosts.push_back(placement.host);
  watchdog_->set_hosts(std::move(hosts));
}

comm::Communicator& Runtime::gradient_communicator(Allreduce how) {
  if (device_comm_) return *device_comm_;
  if (!owns_mpi_) return *world_;  // a world of one: nothing to arrange
  MIRRORED_CHECK(how != Allreduce::kAuto, "gradient_communicator(kAuto): resolve the choice first");
  if (how == Allreduce::kHierarchical) {
    if (!hierarchical_gradients_)
      hierarchical_gradients_ = std::make_unique<comm::HierarchicalCommunicator>(world_comm(), watchdog_.get());
    return *hierarchical_gradients_;
  }
  if (!flat_gradients_) flat_gradients_ = std::make_unique<comm::MpiCommunicator>(world_comm(), watchdog_.get(), "gradients");
  return *flat_gradients_;
}

int Runtime::hierarchical_nodes() const { return hierarchical_gradients_ ? hierarchical_gradients_->num_nodes() : 0; }

Runtime::~Runtime() {
  if (std::uncaught_exceptions() > 0) {
    // An error is on its way to main, which aborts the whole job. Finalising here would
    // wait for peers that may never come (MPI_Finalize and MPI_Comm_free synchronise),
    // so leave MPI as it is and let MPI_Abort end everything.
    (void)hierarchical_gradients_.release();
    (void)flat_gradients_.release();
    (void)device_comm_.release();
    (void)device_context_.release();  // NCCL, left alive, may still use its stream
    (void)job_channel_.release();
    (void)world_.release();
    (void)watchdog_.release();
    return;
  }
  // The fixed order: the communicators made last go first; NCCL before the MPI world it
  // was bootstrapped over; the world before the watchdog that watches it; MPI last.
  hierarchical_gradients_.reset();
  flat_gradients_.reset();
  device_comm_.reset();
  device_context_.reset();  // after NCCL, which queued its work on this stream
  job_channel_.reset();
  world_.reset();
  if (watchdog_) watchdog_->stop();
  watchdog_.reset();
  if (owns_mpi_) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
      free_job_communicator(world_base_);
      free_job_communicator(replaced_job_comm_);
      free_job_communicator(job_comm_);
    }
    if (!finalized && shrinks_ > 0) exit_if_finalize_hangs();
    if (!finalized) MIRRORED_MPI_LOG(MPI_Finalize());
  }
}

void Runtime::exit_if_finalize_hangs() const {
  const double seconds = std::clamp(collective_timeout_s_, 5.0, 30.0);
  const int status = exit_status_;
  const int64_t daemon = launcher_daemon_;
  std::thread([seconds, status, daemon] {
    // Also as soon as the launcher daemon is gone (the watchdog, which watches for that
    // while training, has stopped): mpirun has ended the job and nothing waits for us.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    bool orphaned = false;
    while (std::chrono::steady_clock::now() < deadline && !orphaned) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      orphaned = comm::abandoned_by_launcher(daemon);
    }
    if (!orphaned)
      rank_warning(str_cat("MPI_Finalize has not returned ", fixed(seconds, 0),
                           " s after the job lost ranks (Open MPI waits for them); exiting with status ", status));
    report_exit_status(status);  // main() will not get to it
    std::fflush(nullptr);
    std::_Exit(status);
  }).detach();
}

void Runtime::revoke_communicators() {
  MIRRORED_CHECK(owns_mpi_ && survive_failures_, "revoke_communicators needs an MPI job with survive_failures");
  comm::revoke_tracked_communicators();
}

std::vector<JobMember> Runtime::job_members() const {
  if (!members_.empty() || pids_.empty()) return members_;
  // Before the first shrink the world is the whole job, in job order.
  std::vector<JobMember> members;
  for (size_t r = 0; r < pids_.size(); ++r) {
    JobMember member{pids_[r], hosts_.at(r), first_world_ranks_.at(r)};
    if (r < devices_.size()) member.device = devices_[r];  // once remember_rank_placements() ran
    if (r < local_rank_overrides_.size()) member.local_rank_override = local_rank_overrides_[r];
    members.push_back(std::move(member));
  }
  return members;
}

ShrunkJob Runtime::shrink_job(const std::function<void()>& when_ranks_lost) {
  MIRRORED_CHECK(owns_mpi_ && survive_failures_, "shrink_job needs an MPI job with survive_failures");
  ++shrinks_;
  if (members_.empty()) members_ = job_members();
  MPI_Comm survivors = comm::shrink_communicator(job_comm_);
  int size_before = 0, size_after = 0;  // local calls, also on the revoked communicator
  MPI_Comm_size(job_comm_, &size_before);
  MPI_Comm_size(survivors, &size_after);
  if (size_after < size_before && when_ranks_lost) when_ranks_lost();
  // Every survivor shrinks this one should another rank be lost, even before the rebuild.
  // The old one is freed with the communicators built over it, by the rebuild.
  free_job_communicator(replaced_job_comm_);  // a shrink whose rebuild never came
  replaced_job_comm_ = job_comm_;
  job_comm_ = survivors;
  ShrunkJob shrunk;
  shrunk.size_before = static_cast<int>(members_.size());
  int size = 0;
  MIRRORED_MPI_CHECK(MPI_Comm_rank(job_comm_, &shrunk.rank));
  MIRRORED_MPI_CHECK(MPI_Comm_size(job_comm_, &size));
  // Who each survivor is: its rank in the job before, by translating the shrunk group into
  // the old one. Local (group queries are allowed on the revoked communicator), so it costs
  // no round over TCP, and every survivor derives the same table from the same group.
  MPI_Group before_group = MPI_GROUP_NULL, after_group = MPI_GROUP_NULL;
  MIRRORED_MPI_CHECK(MPI_Comm_group(replaced_job_comm_, &before_group));
  MIRRORED_MPI_CHECK(MPI_Comm_group(job_comm_, &after_group));
  std::vector<int> after_ranks(static_cast<size_t>(size)), before_ranks(static_cast<size_t>(size));
  std::iota(after_ranks.begin(), after_ranks.end(), 0);
  const int translated =
      MPI_Group_translate_ranks(after_group, size, after_ranks.data(), before_group, before_ranks.data());
  MPI_Group_free(&after_group);
  MPI_Group_free(&before_group);
  MIRRORED_MPI_CHECK(translated);
  std::vector<JobMember> members;
  for (const int before : before_ranks) {
    MIRRORED_CHECK(before != MPI_UNDEFINED && before >= 0 && before < static_cast<int>(members_.size()),
                   "a survivor of the shrink is not in the job before it (rank ", before, ")");
    shrunk.previous_rank.push_back(before);
    members.push_back(members_[static_cast<size_t>(before)]);
  }
  members_ = std::move(members);
  return shrunk;
}

void Runtime::rebuild_communicators(const std::vector<int>& world) {
  MIRRORED_CHECK(owns_mpi_ && survive_failures_ && shrinks_ > 0, "rebuild_communicators needs a shrink_job() first");
  const int job_size = static_cast<int>(members_.size());
  std::vector<bool> listed(static_cast<size_t>(job_size), false);
  for (const int rank : world) {
    MIRRORED_CHECK(rank >= 0 && rank < job_size && !listed[static_cast<size_t>(rank)], "rebuild_communicators: job rank ",
                   rank, " in a world over a job of ", job_size, " (each job rank at most once)");
    listed[static_cast<size_t>(rank)] = true;
  }
  bool whole_job = static_cast<int>(world.size()) == job_size;
  for (size_t i = 0; whole_job && i < world.size(); ++i) whole_job = world[i] == static_cast<int>(i);
  MIRRORED_CHECK(!world.empty() && (whole_job || spares_ > 0), "rebuild_communicators: a world of ", world.size(),
                 " rank(s) for a job of ", job_size, "; without spares only the whole job, in job order");
  const Stopwatch since_start;
  // The old communicators are revoked: freeing them no longer waits for anyone. The
  // watchdog's stop() synchronises on its (revoked) communicator, which returns at once.
  hierarchical_gradients_.reset();
  flat_gradients_.reset();
  device_comm_.reset();
  job_channel_.reset();
  world_.reset();
  if (watchdog_) watchdog_->stop();
  watchdog_.reset();
  free_job_communicator(world_base_);
  free_job_communicator(replaced_job_comm_);
  // Tracked from now on (no thread of the old watchdog is left to revoke it on the old
  // failure's news): a failure seen anywhere revokes it, so no survivor stays blocked in it.
  comm::track_communicator(job_comm_);
  training_ranks_ = world;
  spare_ = false;
  if (spares_ > 0) split_world(world);
  const double split_at = since_start.seconds();
  // Two duplicates of the new world, a round over TCP each, kept: the watchdog's thread
  // probes for any message (MPI_ANY_TAG) of its heartbeats, which on a shared communicator
  // would take the world's; and without spares world_comm() is the job's communicator,
  // which the next failure shrinks (the world's copy is revoked and freed, not shrunk).
  watchdog_ = std::make_unique<comm::CollectiveWatchdog>(world_comm(), collective_timeout_s_, trace_collectives_,
                                                         on_timeout());
  watchdog_->set_launcher_daemon(launcher_daemon_);
  world_ = std::make_unique<comm::MpiCommunicator>(world_comm(), watchdog_.get(), "world");
  const double communicators_at = since_start.seconds();
  identify_process();
  // Every process's host, device and local-rank override were gathered at start-up and
  // do not change: the new world's table needs no communication.
  std::vector<std::string> hosts, devices;
  std::vector<int32_t> overrides;
  for (const int rank : world) {
    const JobMember& member = members_.at(static_cast<size_t>(rank));
    hosts.push_back(member.host);
    devices.push_back(member.device);
    overrides.push_back(member.local_rank_override);
  }
  cluster_ = Cluster::from_members(world_->rank(), hosts, devices, overrides);
  watchdog_->set_hosts(std::move(hosts));
#ifdef MIRRORED_WITH_CUDA
  // NCCL from a fresh bootstrap over the new world (the id broadcast over MPI).
  if (device_.is_cuda() && wants_device_communicator_ && !spare_) {
    if (world_->size() > 1)
      device_comm_ = std::make_unique<comm::NcclCommunicator>(*world_, device_.index, collective_timeout_s_,
                                                              survive_failures_);
    else
      device_comm_ = std::make_unique<comm::LocalCommunicator>();
  }
#endif
  if (spares_ > 0) job_channel_ = std::make_unique<JobChannel>(job_comm_);
  chief_verbose(str_cat("recovery: communicators rebuilt in ", fixed(since_start.seconds(), 3), " s (world split ",
                        fixed(split_at, 3), " s, watchdog and world duplicated by ", fixed(communicators_at, 3),
                        " s, then the cluster table and the job channel)"));
}

bool Runtime::poll_job_channel() { return job_channel_ && job_channel_->poll(); }

void Runtime::wait_as_spare() {
  MIRRORED_CHECK(job_channel_ && spare_, "wait_as_spare on a process that is no spare");
  job_channel_->wait_for_end(launcher_daemon_);
}

void Runtime::announce_end_to_spares() {
  if (!job_channel_ || world_->rank() != 0) return;
  std::vector<int> spares;
  for (int rank = 0; rank < static_cast<int>(job_members().size()); ++rank)
    if (std::find(training_ranks_.begin(), training_ranks_.end(), rank) == training_ranks_.end()) spares.push_back(rank);
  job_channel_->announce_end(spares);
}

// A job communicator a shrink made: untracked and freed. MPI_COMM_WORLD is MPI's own.
void Runtime::free_job_communicator(MPI_Comm& comm) {
  if (comm == MPI_COMM_NULL || comm == MPI_COMM_WORLD) return;
  comm::untrack_communicator(comm);
  MIRRORED_MPI_LOG(MPI_Comm_free(&comm));
  comm = MPI_COMM_NULL;
}

void Runtime::abort_job(ExitCode code) { comm::abort_job(code); }

void Runtime::end_job_alike(ExitCode code, const std::string& unprinted) { comm::end_job_alike(code, unprinted); }

}  // namespace mirrored::runtime
