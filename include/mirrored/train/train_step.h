#pragma once
// The training step, written once: `mirrored train`, `mirrored bench train` (through the
// Trainer) and a custom loop (examples/custom_loop) all call train_step().
//
//   for each of the model's accumulate_steps micro-batches:
//     data -> forward -> loss -> backward (the last backward starts the bucket all-reduces)
//     (reduction = invariant: forward -> loss -> backward once per virtual replica's group)
//   synchronize_gradients (mean over replicas and micro-batches)
//   -> NaN/Inf flag -> gradient clipping -> optimizer step
//   (sharded: -> all-gather of the parameters -> the shard's copy to its keeper)
//
// Unsharded, nothing in it waits for a GPU: the losses stay on the device
// (StepResult::losses), the NaN/Inf guard and the clipping decide there, and the host reads
// them when it reports. Sharded, two one-value all-reduces (the non-finite flag and the
// clip norm's sum of squares) complete before the update: on a GPU each waits for the
// device once (NCCL's blocking all-reduce), a few microseconds after backward has drained.

#include <cstdint>
#include <functional>

#include "mirrored/checkpoint/device_snapshot.h"
#include "mirrored/core/timeline.h"
#include "mirrored/distribute/distributed_dataset.h"
#include "mirrored/distribute/distributed_model.h"
#include "mirrored/distribute/shard_copies.h"
#include "mirrored/nn/loss.h"
#include "mirrored/optim/optimizer.h"

namespace mirrored::train {

class NonFiniteGuard;

enum class StepPhase { kData, kForward, kBackward, kAllreduce, kOptimizer };
inline constexpr int kStepPhases = 5;
const char* step_phase_name(StepPhase phase);  // "data", "forward", "backward", "all-reduce", "optimizer"

struct StepHooks {
  Timeline* timeline = nullptr;      // "data" and "optimizer" spans (the model records its own)
  NonFiniteGuard* guard = nullptr;   // null: every update is applied
  // Where the micro-batch losses go: f32 [accumulate_steps x virtual_replicas] on the
  // model's device (e.g. StepLosses::slots), micro-batch major. Undefined: train_step
  // allocates them, once per call.
  Tensor losses;
  // > 0: clip the averaged gradient to this global L2 norm before the update (grad_clip).
  float grad_clip = 0.0f;
  // Sharded state under on_failure = shrink: the own shard is kept from before the update,
  // and sent to its keeper once the step is settled (shard_copies.h). Null: no copies.
  distribute::ShardCopies* shard_copies = nullptr;
  // A background checkpoint's snapshot that may still be copying (GPU) or reading (CPU) the
  // parameters and optimizer state (checkpoint/device_snapshot.h): the update waits for it
  // on the GPU stream, or copies on the host what the writer has not read yet. Null: none.
  checkpoint::DeviceSnapshot* checkpoint_snapshot = nullptr;
  // Called as each phase ends; with micro-batches, data once per micro-batch and
  // forward/backward once per pass (micro-batch x virtual replica).
  std::function<void(StepPhase)> phase_done;
};

struct StepResult {
  // This replica's mean loss of each pass (micro-batch x virtual replica; not reduced), on
  // the model's device:
  // step_loss(losses) (step_losses.h) reads the step's loss, waiting for the GPU.
  Tensor losses;
};

// The next batch of this replica; the reference stays valid until the next call.
using NextBatch = std::function<const distribute::Batch&()>;

// One update of `model` on this replica. `step` is the number of updates done before this
// one (dropout masks and the guard's messages are keyed by it). The learning rate is the
// optimizer's current one.
StepResult train_step(distribute::DistributedModel& model, optim::Optimizer& optimizer, nn::CrossEntropyLoss& loss_fn,
                      const NextBatch& next_batch, int64_t step, const StepHooks& hooks = {});

}  // namespace mirrored::train
