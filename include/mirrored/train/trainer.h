#pragma once
// The training loop, written against the strategy API a library user would use for a
// custom loop. Set-up (data, model, optimizer) happens in the constructor; fit() first
// resumes from the run's checkpoint when configured (or starts from init_from), then runs
// the steps (train_step.h, the one step of the project), a log point every `log_every`
// steps, and an evaluation at each epoch end (or every `eval_every` steps). The data,
// images or tokens, sits behind TrainingData (training_data.h). Everything around the loop
// is a Callback: `mirrored train` adds the standard ones (app/run_training.h), `bench train`
// a timing one.
#include <cstdint>
#include <memory>
#include <vector>

#include "mirrored/checkpoint/checkpoint_writer.h"
#include "mirrored/checkpoint/replica_snapshot.h"
#include "mirrored/config/config.h"
#include "mirrored/config/library_options.h"
#include "mirrored/distribute/strategy.h"
#include "mirrored/runtime/runtime.h"
#include "mirrored/train/callback.h"
#include "mirrored/train/loaded_datasets.h"

namespace mirrored::train {

struct TrainerOptions {
  bool write_files = true;  // the run directory (config.ini, metrics) and resuming from its checkpoints
  bool evaluate = true;     // the test set at each epoch end and after training
  int64_t steps = 0;        // > 0: exactly this many steps, past `epochs` when needed (benchmarks)
  // The run's checkpoint writer, shared by the Trainers of one run (a shrink starts a new
  // one); nullptr: the Trainer makes its own for config.out.
  checkpoint::CheckpointWriter* checkpoints = nullptr;
  // The data sets read before, kept for the Trainers of one run (a shrink starts a new one,
  // which then reads no file again); nullptr: the Trainer reads its files itself.
  LoadedDatasets* datasets = nullptr;
};

class Trainer {
 public:
  // Collective. Loads the data, builds and mirrors the model and the optimizer. Throws
  // InputError for a configuration that does not fit the data or the world size.
  Trainer(const config::TrainConfig& config, runtime::Runtime& runtime, TrainerOptions options = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Callbacks run in the order they are added.
  void add_callback(std::unique_ptr<Callback> callback);
  // Collective. Resumes (when configured), trains, and returns the summary.
  TrainSummary fit();

  distribute::MirroredStrategy& strategy();
  distribute::DistributedModel& model();

  // What this replica holds after its last completed step (checkpoint/replica_snapshot.h),
  // taken without any collective, so also after a comm::PeerFailure left fit() (the job's
  // communicators are revoked by then). Sharded state is snapshotted from its shard copies,
  // which exist under on_failure = shrink; without them Error.
  checkpoint::ReplicaSnapshot snapshot();

 private:
  struct State;
  void begin();
  void keep_shard_copies();
  void run_epoch(int64_t epoch);
  StepEnd step(int64_t epoch, int64_t step_in_epoch);
  void log_point(int64_t epoch);
  void score_stragglers(LogPoint& point);
  void settle_guard();
  void end_epoch(int64_t epoch);
  void evaluate_now(int64_t epoch);
  void record_eval(const EvalResult& eval);
  TrainSummary finish();
  template <typename Fn>
  void for_each_callback(Fn&& fn);

  std::unique_ptr<State> s_;
};

}  // namespace mirrored::train
