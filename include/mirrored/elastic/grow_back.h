#pragma once
// Growing back: a job that shrank (on_failure = shrink) returns to the size it was launched
// with, losing no step. No rank joins a running world: the job saves its state at a step
// boundary (the preemption path: a full checkpoint, waited for), ends with
// ExitCode::kResizeRequested (11), and the launch script starts it again at its configured
// size, which resumes from that checkpoint (bit for bit with reduction = invariant).
//
//   GrowBack          the owner's (ElasticRun's) state: the world the job started with, the
//                     reader of the run-state file `resize` (core/run_state.h), and the
//                     hosts shrinks left without a rank (run-state file `lost-hosts`, for
//                     the launch script's check whether they answer again).
//   watcher()         a callback for each Trainer: the chief reads the requests at most every
//                     100 ms; a shrunk job asks to stop (train::request_resize), a job at
//                     full size ignores them with a message.
//   GrowthReporter    a callback for the first Trainer of a launch: when metrics.jsonl ends
//                     with the {"kind": "resize"} record of the step this launch resumed
//                     from and the world is larger now, the first step's end writes the
//                     membership record {"kind": "membership", "step", "world_size",
//                     "lost": [], "grown": [{"from_world", "to_world", "downtime_s",
//                     "trigger", "stopped_ms", "first_step_ms"}]} and prints the downtime.
//
// Requests come from `mirrored resize RUN_DIR` (cli/resize_command.cpp), from the launch
// scripts on SIGURG, and from launch/multinode.sh when a lost host answers again.
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "mirrored/core/run_state.h"
#include "mirrored/core/timer.h"
#include "mirrored/elastic/membership.h"
#include "mirrored/io/jsonl_reader.h"
#include "mirrored/train/callback.h"

namespace mirrored::elastic {

class GrowBack {
 public:
  // `launched_world`: the ranks the job trained with before any loss (its configured size).
  explicit GrowBack(int launched_world) : launched_world_(launched_world) {}

  // A callback that polls the resize requests (one per Trainer; it refers to this object,
  // which keeps what was read across Trainers).
  std::unique_ptr<train::Callback> watcher();

  // Chief only: polls the run-state file `resize` (rate-limited) and acts on new requests.
  void poll(train::TrainContext& ctx);

  // Chief only, after a shrink: adds the hosts of `membership.lost` that no survivor runs on
  // (`survivor_hosts`) to the run-state file `lost-hosts` (replaced whole).
  void record_lost_hosts(const Membership& membership, const std::vector<std::string>& survivor_hosts);

 private:
  const int launched_world_;
  RunStateReader requests_{kResizeRequestFile};
  Stopwatch since_poll_;
  bool polled_ = false;
  std::set<std::string> lost_hosts_;
};

// The downtime of a grow: what the relaunch found in metrics.jsonl.
struct PendingGrowth {
  int64_t step = 0;        // the step the resize checkpoint holds
  int64_t from_world = 0;  // the world that asked
  std::string trigger;
  int64_t stopped_ms = 0;  // wall time of that step's end (milliseconds since the epoch)
};

// The last {"kind": "resize"} record of `records` (metrics.jsonl's), when no membership
// record follows it: the resize this launch may complete. `origin` names the file in errors
// (a record with a field of the wrong type). Exposed for the tests.
std::optional<PendingGrowth> pending_growth(const std::vector<io::JsonObject>& records, const std::string& origin);

class GrowthReporter final : public train::Callback {
 public:
  void on_train_begin(train::TrainContext& ctx) override;
  void on_step_end(train::TrainContext& ctx, const train::StepEnd& end) override;

 private:
  std::optional<PendingGrowth> pending_;
  bool done_ = false;
};

}  // namespace mirrored::elastic
