#pragma once
// Checkpoints of a training run (TF's BackupAndRestore), as callbacks of the loop: the chief
// writes them to <out>/checkpoints/ckpt-<step>.h5 through the run's one writer
// (checkpoint/checkpoint_writer.h, which keeps the newest `checkpoint.keep`), when the
// policy says (checkpoint/checkpoint_store.h), and a new run with `resume = auto` continues
// from the one checkpoint/resume_policy.h chooses.
//
// A checkpoint is taken only at a log point (the trainer makes every checkpoint step one),
// so the metrics interval is empty there and a resumed run logs exactly the records the
// uninterrupted run would. Epoch-end checkpoints are taken after the epoch's evaluation, so
// a resumed run never repeats or skips one. The position in the data is the step count
// alone: epoch = step / steps_per_epoch, step in epoch = step % steps_per_epoch, because
// the data order is a function of (seed, epoch).
#include <cstdint>
#include <string>
#include <vector>

#include "mirrored/checkpoint/checkpoint_store.h"
#include "mirrored/io/checkpoint_file.h"
#include "mirrored/train/callback.h"

namespace mirrored::train {

// The chief's snapshot of the run after `step` steps, without the optimizer state (see
// gather_optimizer_state). kLater: the parameters' names and shapes without their values,
// which a device snapshot brings (checkpoint/device_snapshot.h; Checkpointer::save).
// `spent`: a checkpoint already written (CheckpointWriter::take_spent) whose host buffers
// the values are copied into, tensor by tensor in order, instead of fresh ones.
enum class ParameterValues { kNow, kLater };
io::Checkpoint capture_checkpoint(const TrainContext& ctx, int64_t step,
                                  ParameterValues values = ParameterValues::kNow, io::Checkpoint spent = {});

// Collective: the optimizer state in its logical, unsharded layout (one flat tensor of the
// arena's size per state tensor), whatever the world size and sharding, on the chief; empty
// on the other ranks. Sharded state is collected shard by shard, so no rank holds more than
// the logical state plus one shard. `spent`: buffers to refill, as for capture_checkpoint.
std::vector<io::CheckpointTensor> gather_optimizer_state(TrainContext& ctx,
                                                         std::vector<io::CheckpointTensor> spent = {});

struct ResumePoint {
  int64_t step = 0;       // steps already done; 0 for a fresh start
  std::string source;     // the checkpoint file, empty for a fresh start
  bool finished = false;  // resume = auto found the run complete: nothing to train or write
};

// Collective. Applies `config.resume`: the chief picks the newest checkpoint that reads,
// verifies and fits this model, optimizer and data (checkpoint::choose_resume, warning
// about each one it skips),
// then broadcasts parameters, optimizer state and step to every replica, so workers need
// no shared file system. No usable checkpoint where one was expected: InputError(kCheckpoint)
// on every rank. With resume = auto, a newest checkpoint written with other values of the
// keys that change the result is another run: InputError(kUsage) naming them and the ways
// out; one at the last step of a run whose final.h5 exists is a finished run (`finished`).
ResumePoint restore_checkpoint(TrainContext& ctx);

class Checkpointer final : public Callback {
 public:
  void on_log(TrainContext& ctx, const LogPoint& point) override;
  void on_epoch_end(TrainContext& ctx, const EpochEnd& end) override;
  // The run's checkpoints are durable (or their failure is thrown) before training returns.
  void on_train_end(TrainContext& ctx, const TrainSummary& summary) override;

  enum class Wait { kNo, kUntilDurable };
  // Collective: every rank takes part in the snapshot (the optimizer state is gathered in
  // the step, on the training communicator); the chief then writes the checkpoint of `step`
  // through the run's writer (ctx.checkpoints: it prunes old ones): on its background
  // thread with checkpoint.async (CheckpointWriter::background_writes), returning before the
  // file is durable unless `wait` says so, else in the step. Public for callbacks that must
  // checkpoint out of schedule (preemption, which waits).
  void save(TrainContext& ctx, int64_t step, Wait wait = Wait::kNo);
};

}  // namespace mirrored::train
