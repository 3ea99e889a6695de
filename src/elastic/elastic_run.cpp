#include "mirrored/elastic/elastic_run.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>

#include "mirrored/comm/failure/runtime_loss.h"
#include "mirrored/config/library_options.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/core/process.h"
#include "mirrored/elastic/state_recovery.h"

namespace mirrored::elastic {
namespace {

// Hot spares (shrink.spares): each training rank listens on the job channel at every step's
// end, so a lost spare, which shares none of the world's communicators, is noticed too
// (comm::PeerFailure, and the owner recovers as from any loss).
class JobChannelWatch final : public train::Callback {
 public:
  explicit JobChannelWatch(runtime::Runtime& runtime) : runtime_(runtime) {}
  void on_step_end(train::TrainContext&, const train::StepEnd&) override { (void)runtime_.poll_job_channel(); }

 private:
  runtime::Runtime& runtime_;
};

// Where a recovery's time goes after the state is written (--verbose): the new Trainer's
// start (its checkpoint read, its data's first epoch) up to its first step, which the
// membership record times.
class RecoveryPhases final : public train::Callback {
 public:
  explicit RecoveryPhases(Stopwatch since_failure) : since_failure_(since_failure) {}
  void on_train_begin(train::TrainContext&) override {
    chief_verbose(str_cat("recovery: the new Trainer resumed from the recovered state ", fixed(since_failure_.seconds(), 3),
                          " s after the failure was detected"));
  }

 private:
  Stopwatch since_failure_;
};

// Only the watchdog's revoke at a collective timeout leads to a shrink with every rank alive
// (a mismatched collective order, a rank hung in compute that MPI's detector still hears):
// shrinking changes nothing there, and going on would time out again. Every rank sees the
// same agreed job, so each ends alike and on its own: an MPI_Abort here can hang in the
// runtime after the revoke.
[[noreturn]] void end_job_nobody_lost() {
  rank_error("a collective timed out, but no rank was lost: every rank is alive (a mismatched collective order, "
             "or a rank hung in compute); shrinking cannot fix that, ending the job (the collective timeout "
             "above names what stalled)");
  const int status = static_cast<int>(ExitCode::kCommTimeout);
  report_exit_status(status);
  std::fflush(nullptr);
  std::_Exit(status);
}

// A lost rank that is only stopped would keep mpirun waiting for ever: the lowest survivor
// on its host ends it (only a process of this job with that rank: comm::end_lost_process).
void end_stopped_ranks(const std::vector<runtime::JobMember>& before, const runtime::ShrunkJob& shrunk,
                       const Membership& membership) {
  // Named as the world knew it: a training rank by its world rank, a spare as a spare.
  const auto name = [&](int job_rank) {
    for (const auto& lost : membership.lost)
      if (lost.job_rank == job_rank) return str_cat("rank ", lost.rank);
    for (const auto& replaced : membership.replaced)
      if (replaced.job_rank == job_rank) return str_cat("rank ", replaced.rank);
    return str_cat("spare ", job_rank);
  };
  for (const int rank : lost_ranks_to_end(before, shrunk, membership)) {
    const runtime::JobMember& lost = before.at(static_cast<size_t>(rank));
    if (comm::end_lost_process(lost.pid, lost.first_world_rank))
      rank_warning(str_cat(name(rank), " (pid ", lost.pid, " on ", lost.host,
                           ") was still there, stopped or hung: ended it, so the job can end"));
  }
}

}  // namespace

ElasticRun::ElasticRun(const config::TrainConfig& config, runtime::Runtime& runtime,
                       checkpoint::CheckpointWriter& checkpoints, train::LoadedDatasets& datasets)
    : current_(config),
      runtime_(runtime),
      checkpoints_(checkpoints),
      datasets_(datasets),
      survive_failures_(config.on_failure == config::OnFailure::kShrink),
      // The configured size: the ranks that train (a spare's world() is the spares' own).
      grow_back_(runtime.training_ranks().empty() ? runtime.world().size()
                                                  : static_cast<int>(runtime.training_ranks().size())) {}

ElasticRun::~ElasticRun() { join_data_loader(); }

// The cycle: train (or wait as a spare) until a peer is lost, recover with the survivors
// (a spare may be called in), go on with a new Trainer. The chief tells the spares when
// training ends, however it ends.
train::TrainSummary ElasticRun::run(const TrainerFactory& make_trainer) {
  if (current_.shrink_spares > 0) say_who_waits();
  for (;;) {
    std::optional<checkpoint::ReplicaSnapshot> snapshot;
    if (runtime_.is_spare()) {
      if (wait_as_spare()) return {};
    } else if (std::optional<train::TrainSummary> summary = train(make_trainer, snapshot)) {
      runtime_.announce_end_to_spares();
      return *summary;
    }
    const std::optional<Recovery> recovery = recover(snapshot);
    if (!recovery) {
      runtime_.announce_end_to_spares();
      train::TrainSummary summary;
      summary.steps = recovered_ ? recovered_->step : 0;
      summary.too_few_replicas = true;
      return summary;
    }
    if (!runtime_.is_spare()) go_on_from(*recovery);
  }
}

// The launcher started world + spares ranks; said once, so a launch that forgot the spares
// (a world smaller than meant) shows at once.
void ElasticRun::say_who_waits() const {
  const std::vector<runtime::JobMember> members = runtime_.job_members();
  const std::vector<int>& training = runtime_.training_ranks();
  std::string spares;
  for (int rank = 0; rank < static_cast<int>(members.size()); ++rank)
    if (std::find(training.begin(), training.end(), rank) == training.end())
      spares += str_cat(spares.empty() ? "" : ", ", rank, " (", members[static_cast<size_t>(rank)].host, ")");
  chief_info(str_cat("hot spares: ", training.size(), " rank(s) train, job rank(s) ", spares,
                     " wait to take a lost rank's place (shrink.spares = ", current_.shrink_spares, ")"));
}

// A spare's wait: true when training ended; false on a loss, which the recovery answers
// (this spare may take a lost rank's place). Its first wait also reads the run's data sets,
// on a thread, so the wait goes on polling (a spare that stopped answering for the
// second a read takes could be declared failed); the read is over before it goes on.
bool ElasticRun::wait_as_spare() {
  if (!read_ahead_) {
    read_ahead_ = true;
    data_loader_ = std::thread([this, lib = config::library_options(current_)] {
      try {
        datasets_.load_ahead(lib, true);
      } catch (const std::exception& error) {  // left to the Trainer, which reports it as the others do
        rank_warning(str_cat("a spare could not read the data sets ahead (called in, its Trainer reads them): ",
                             error.what()));
      }
    });
  }
  try {
    runtime_.wait_as_spare();
    join_data_loader();
    return true;
  } catch (const comm::PeerFailure& failure) {
    peer_failed(failure);
    join_data_loader();
    return false;
  }
}

void ElasticRun::join_data_loader() {
  if (data_loader_.joinable()) data_loader_.join();
}

// One Trainer's life. Its summary, or nothing when a peer failed: `snapshot` then holds what
// this replica had (none when the failure came while the Trainer was built or torn down).
std::optional<train::TrainSummary> ElasticRun::train(const TrainerFactory& make_trainer,
                                                     std::optional<checkpoint::ReplicaSnapshot>& snapshot) {
  try {
    std::unique_ptr<train::Trainer> trainer = make_trainer(current_);
    if (recovered_) {
      chief_verbose(str_cat("recovery: the new Trainer built (model, optimizer, data) ",
                            fixed(since_failure_.seconds(), 3), " s after the failure was detected"));
      trainer->add_callback(std::make_unique<RecoveryPhases>(since_failure_));
      trainer->add_callback(std::make_unique<MembershipReporter>(*recovered_, since_failure_));
    }
    trainer->add_callback(grow_back_.watcher());
    if (first_trainer_) trainer->add_callback(std::make_unique<GrowthReporter>());
    first_trainer_ = false;
    if (current_.shrink_spares > 0) trainer->add_callback(std::make_unique<JobChannelWatch>(runtime_));
    try {
      return trainer->fit();
    } catch (const comm::PeerFailure& failure) {
      if (!survive_failures_) throw;
      peer_failed(failure);
      snapshot = trainer->snapshot();
    }
  } catch (const comm::PeerFailure& failure) {  // while a Trainer was being built or torn down
    if (!survive_failures_) throw;
    if (!snapshot) peer_failed(failure);
  }
  return std::nullopt;
}

void ElasticRun::peer_failed(const comm::PeerFailure& failure) {
  since_failure_.reset();
  // The MPI error's words only: where in mirrored's source it surfaced says nothing to a
  // user (--verbose shows it).
  rank_warning(str_cat("a peer failed (", failure.reason(), "): recovering with the survivors",
                       runtime_.is_spare() ? " (this rank is a spare)" : ""));
  chief_verbose(str_cat("peer failure seen at ", failure.what()));
}

// Collective over the survivors. Nothing when too few of them can go on: each then ends on
// its own, without MPI_Abort, so nothing outlives the job.
std::optional<Recovery> ElasticRun::recover(const std::optional<checkpoint::ReplicaSnapshot>& snapshot) {
  settled_members_ = runtime_.job_members();
  settled_training_ = runtime_.training_ranks();
  was_spare_ = runtime_.is_spare();
  try {
    // A peer lost during the recovery itself: shrink again and start the recovery over.
    for (;;) {
      try {
        return recover_once(snapshot);
      } catch (const comm::PeerFailure& failure) {
        rank_warning(str_cat("a peer failed during the recovery: ", failure.what()));
      }
    }
  } catch (const Error& error) {
    if (error.code() != ExitCode::kTooFewReplicas) throw;
    if (runtime_.rank() == 0) rank_error(error.what());
    return std::nullopt;
  }
}

// New world, then state: what the next Trainer starts from.
// A spare that stays one returns from here with the membership only, and waits again.
Recovery ElasticRun::recover_once(const std::optional<checkpoint::ReplicaSnapshot>& snapshot) {
  Recovery recovery;
  recovery.membership = agree_on_new_world();
  if (runtime_.is_spare()) return recovery;
  if (runtime_.world().rank() == 0) grow_back_.record_lost_hosts(recovery.membership, survivor_hosts());
  const double new_world_at = since_failure_.seconds();
  const bool called_in = was_spare_;  // it holds no state: its peers' comes to it
  int64_t step = -1;
  recovery.checkpoint = write_recovered_state(snapshot, recovery.membership, called_in, step);
  // Where a recovery's time goes (the rest, to recovery_s, is the new Trainer's start and
  // its first step).
  chief_verbose(str_cat("recovery: the new world agreed and built ", fixed(new_world_at, 3),
                        " s after the failure was detected (the job shrunk to its live ranks at ",
                        fixed(shrunk_at_s_, 3), " s), the state written at ", fixed(since_failure_.seconds(), 3), " s"));
  recovery.step = std::max<int64_t>(step, 0);
  require_enough_replicas(recovery);
  chief_info(str_cat(recovery.membership.lost.empty() ? "" : "lost ", describe_change(recovery.membership),
                     ": going on with ", recovery.membership.world_size, " replica(s) from step ", recovery.step,
                     " (rank 0, the chief, is now on ", runtime_.cluster().host(), "; ",
                     recovery.membership.spares_left, " spare(s) left)"));
  return recovery;
}

// The hosts the job's ranks run on now.
std::vector<std::string> ElasticRun::survivor_hosts() const {
  std::vector<std::string> hosts;
  for (const runtime::JobMember& member : runtime_.job_members()) hosts.push_back(member.host);
  return hosts;
}

// Collective over the job's live ranks: who was lost since the settled membership, and the
// world the survivors go on in.
Membership ElasticRun::agree_on_new_world() {
  const std::vector<runtime::JobMember>& before = settled_members_;
  runtime_.revoke_communicators();
  // Ranks are gone and every survivor agreed: should Open MPI's runtime now end the job (it
  // does when it lost a node's daemon), this rank goes on without it. Said the moment the
  // shrink is agreed: the runtime ends the job within half a second of the loss.
  const runtime::ShrunkJob latest = runtime_.shrink_job(comm::outlive_runtime_after_loss);
  shrunk_at_s_ = since_failure_.seconds();
  const runtime::ShrunkJob shrunk = shrink_of(before, runtime_.job_members(), latest.rank);
  Membership membership = membership_after(before, settled_training_, shrunk);
  membership.with_spares = current_.shrink_spares > 0;
  if (!membership.lost_any()) end_job_nobody_lost();
  runtime_.rebuild_communicators(membership.world);
  end_stopped_ranks(before, shrunk, membership);
  return membership;
}

// Collective over the new world: the state of the last completed step, which the chief
// writes as the checkpoint the run goes on from. Returns its path, or "" when no state
// survived in memory where it can be put together (the newest checkpoint on disk is the
// way on); `step`: the step written, -1 for none.
std::string ElasticRun::write_recovered_state(const std::optional<checkpoint::ReplicaSnapshot>& snapshot,
                                              const Membership& membership, bool called_in, int64_t& step) {
  // A background checkpoint of an earlier step may still be in flight on this rank: it ends
  // before the recovery writes or lists checkpoints. Its failure costs that one file only
  // (the recovered state is written next), so it is a warning here.
  try {
    checkpoints_.wait();
  } catch (const Error& error) {
    rank_warning(error.what());
  }
  comm::Communicator& world = runtime_.world();
  const RecoveredState state = recover_state(world, membership, current_, snapshot, called_in);
  step = state.step;
  if (state.step < 0) {
    chief_info("on_failure = shrink: no replica state to recover in memory; resuming from the newest checkpoint");
    return "";
  }
  if (state.writes) checkpoints_.write(state.checkpoint);
  world.barrier();  // the file exists before anyone resumes from it
  return checkpoints_.path(state.step);
}

// Below shrink.min_replicas survivors (the checkpoint is written by then): Error(kTooFewReplicas).
void ElasticRun::require_enough_replicas(const Recovery& recovery) const {
  const int survivors = recovery.membership.world_size;
  if (survivors >= current_.shrink_min_replicas) return;
  const std::string saved = recovery.checkpoint.empty() ? "the newest checkpoint in " + checkpoints_.dir()
                                                        : "checkpoint " + recovery.checkpoint;
  throw Error(ExitCode::kTooFewReplicas,
              str_cat("lost ", describe_lost(recovery.membership), ": ", survivors,
                      " replica(s) left, fewer than shrink.min_replicas = ", current_.shrink_min_replicas, "; ", saved,
                      " holds step ", recovery.step, ". Start the job again at full size to resume from it (exit ",
                      static_cast<int>(ExitCode::kTooFewReplicas), ")"),
              true);
}

// The next Trainer resumes from the recovered checkpoint, on the new world.
void ElasticRun::go_on_from(const Recovery& recovery) {
  recovered_ = recovery;
  current_.uneven_batch_shares = true;  // the global batch stays; the survivors may split it unevenly
  if (!recovery.checkpoint.empty()) {
    current_.resume = config::ResumeMode::kPath;
    current_.resume_path = recovery.checkpoint;
  } else {
    current_.resume = config::ResumeMode::kAuto;
  }
}

}  // namespace mirrored::elastic
