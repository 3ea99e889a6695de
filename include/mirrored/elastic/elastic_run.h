#pragma once
// The one owner of membership, the way torchft's Manager owns quorum, errors and recovery.
// It runs a training job's Trainers and, under on_failure = shrink, carries the job through
// each lost rank; src/elastic/elastic_run.cpp reads as the cycle:
//
//   train      a Trainer from the caller's factory runs to its end, or until a
//              comm::PeerFailure (a lost peer, seen by this rank or revoked by another)
//              leaves it while it is built, trains or is torn down; what this replica
//              holds is then snapshotted, without a collective (Trainer::snapshot)
//   new world  every communicator revoked; the job shrunk to its live ranks, and when ranks
//              are gone the survivors outlive the MPI runtime's end
//              (comm/failure/runtime_loss.h); who was lost (membership.h); nobody lost: the
//              job ends (exit 5); the communicators rebuilt over the survivors
//              (runtime/runtime.h), the lowest survivor is the chief; a lost rank that is
//              only stopped ended
//   state      the survivors agree on the last completed step and put its state together
//              from their snapshots (state_recovery.h); the run's checkpoint writer writes
//              it as an ordinary checkpoint, so a requeued job can resume from it too
//   go on      fewer than shrink.min_replicas survivors: each ends on its own
//              (kTooFewReplicas, the checkpoint written); otherwise a new Trainer resumes
//              from that checkpoint on the survivors with the same global batch (uneven
//              shares allowed), and its first step writes the membership record
// A peer lost during the recovery starts it over, from the membership it began with.
// Under on_failure = abort the first PeerFailure goes to the caller, which ends the job.
//
// Hot spares (shrink.spares): a spare waits on the job channel instead of training
// (runtime::Runtime::wait_as_spare) and joins the new world step; each lost training rank's
// place goes to the lowest spare left (membership_after), which then holds no state
// (`called_in`: the state step puts it together on the lowest rank holding some) and
// resumes with the others; a spare not called in waits again. A spare reads the run's data
// sets on a thread of its own during its first wait (the main thread keeps polling the
// channel), so that, called in, its Trainer reads no file; the survivors' next Trainers
// reuse theirs (train/loaded_datasets.h). Training ranks test the
// channel at every step's end, so a lost spare is noticed; the chief tells the spares when
// training ends, however it ends.
//
// Growing back (grow_back.h): every Trainer gets a watcher of the resize requests (a shrunk
// job stops for a relaunch at full size, exit 11), the chief lists the hosts a shrink left
// empty for the launch script, and the launch's first Trainer reports a completed growth.
#include <functional>
#include <memory>
#include <optional>
#include <thread>

#include "mirrored/checkpoint/checkpoint_writer.h"
#include "mirrored/checkpoint/replica_snapshot.h"
#include "mirrored/comm/failure/fault_tolerance.h"
#include "mirrored/config/config.h"
#include "mirrored/core/timer.h"
#include "mirrored/elastic/grow_back.h"
#include "mirrored/elastic/membership.h"
#include "mirrored/runtime/runtime.h"
#include "mirrored/train/loaded_datasets.h"
#include "mirrored/train/trainer.h"

namespace mirrored::elastic {

// Builds a Trainer with its callbacks for `config` (the run's configuration, as the owner
// adjusted it to resume after a recovery). Called once, and again after each recovery.
using TrainerFactory = std::function<std::unique_ptr<train::Trainer>(const config::TrainConfig& config)>;

class ElasticRun {
 public:
  // `checkpoints`: the run's checkpoint writer, the one its Trainers write through;
  // `datasets`: the data sets its Trainers read through (a spare loads them while it waits).
  ElasticRun(const config::TrainConfig& config, runtime::Runtime& runtime, checkpoint::CheckpointWriter& checkpoints,
             train::LoadedDatasets& datasets);
  ~ElasticRun();
  ElasticRun(const ElasticRun&) = delete;
  ElasticRun& operator=(const ElasticRun&) = delete;

  // Collective. Trains to the end with Trainers from `make_trainer` and returns the last
  // one's summary; TrainSummary::too_few_replicas when the survivors could not go on.
  train::TrainSummary run(const TrainerFactory& make_trainer);

 private:
  std::optional<train::TrainSummary> train(const TrainerFactory& make_trainer,
                                           std::optional<checkpoint::ReplicaSnapshot>& snapshot);
  void peer_failed(const comm::PeerFailure& failure);
  std::optional<Recovery> recover(const std::optional<checkpoint::ReplicaSnapshot>& snapshot);
  Recovery recover_once(const std::optional<checkpoint::ReplicaSnapshot>& snapshot);
  Membership agree_on_new_world();
  std::vector<std::string> survivor_hosts() const;
  std::string write_recovered_state(const std::optional<checkpoint::ReplicaSnapshot>& snapshot,
                                    const Membership& membership, bool called_in, int64_t& step);
  bool wait_as_spare();
  void join_data_loader();
  void say_who_waits() const;
  void require_enough_replicas(const Recovery& recovery) const;
  void go_on_from(const Recovery& recovery);

  config::TrainConfig current_;  // what the next Trainer gets: the run's, set to resume after a recovery
  runtime::Runtime& runtime_;
  checkpoint::CheckpointWriter& checkpoints_;
  train::LoadedDatasets& datasets_;
  std::thread data_loader_;  // a spare's, reading datasets_ while the spare first waits
  bool read_ahead_ = false;  // data_loader_ was started
  const bool survive_failures_;
  std::optional<Recovery> recovered_;  // the last recovery
  // The membership a recovery began from (what every survivor agreed on before the loss):
  // a recovery that a further loss starts over decides from it again.
  std::vector<runtime::JobMember> settled_members_;
  std::vector<int> settled_training_;  // job ranks of settled_members_ that trained, in world order
  bool was_spare_ = false;             // this process was a spare then
  Stopwatch since_failure_;            // from the last failure's detection
  double shrunk_at_s_ = 0.0;           // when the last shrink of the job returned (--verbose)
  GrowBack grow_back_;                 // resize requests, and the hosts shrinks left empty
  bool first_trainer_ = true;          // the launch's first Trainer reports a completed grow
};

}  // namespace mirrored::elastic
