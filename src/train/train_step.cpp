#include "mirrored/train/train_step.h"

#include "mirrored/core/error.h"
#include "mirrored/train/non_finite_guard.h"
#include "mirrored/train/step_losses.h"

namespace mirrored::train {

const char* step_phase_name(StepPhase phase) {
  constexpr const char* kNames[kStepPhases] = {"data", "forward", "backward", "all-reduce", "optimizer"};
  return kNames[static_cast<int>(phase)];
}

StepResult train_step(distribute::DistributedModel& model, optim::Optimizer& optimizer, nn::CrossEntropyLoss& loss_fn,
                      const NextBatch& next_batch, int64_t step, const StepHooks& hooks) {
  static const std::string kData = "data", kOptimizer = "optimizer";
  auto done = [&](StepPhase phase) {
    if (hooks.phase_done) hooks.phase_done(phase);
  };
  const int micro_batches = model.accumulate_steps();
  const int groups = model.virtual_replicas();
  StepResult result;
  result.losses = hooks.losses.defined()
                      ? hooks.losses
                      : Tensor({micro_batches * groups}, DType::kF32, model.parameters().flat_params().device());
  MIRRORED_CHECK(result.losses.numel() == micro_batches * groups, "train_step: room for ", result.losses.numel(),
                 " losses, ", micro_batches, " micro-batches x ", groups, " virtual replica(s)");
  model.zero_grad();
  for (int micro = 0; micro < micro_batches; ++micro) {
    model.set_step(step * micro_batches + micro);  // dropout masks are keyed by it
    const distribute::Batch* batch;
    {
      Timeline::Span span(hooks.timeline, kData, "data");
      batch = &next_batch();
    }
    done(StepPhase::kData);
    // Fast: the whole batch in one pass. Invariant: each virtual replica's group in a pass
    // of its own, with the same shapes whatever the world size.
    const int64_t rows = groups == 1 ? batch->size() : model.virtual_replica_size();
    MIRRORED_CHECK(rows * groups == batch->size(), "a batch of ", batch->size(), " samples for ", groups,
                   " virtual replicas of ", rows);
    for (int group = 0; group < groups; ++group) {
      model.begin_virtual_replica(group, batch->first_sample + group * rows);
      Tensor loss = result.losses.view(micro * groups + group, {1});
      const Tensor inputs = groups == 1 ? batch->inputs : batch->inputs.rows(group * rows, rows);
      const Tensor targets = groups == 1 ? batch->targets : batch->targets.rows(group * rows, rows);
      // A fast-mode replica with an uneven share of the batch weighs its gradient by it.
      loss_fn.forward_to(model.forward(inputs, nn::Mode::kTrain), targets, loss, model.share_weight());
      done(StepPhase::kForward);
      // Fast: the last micro-batch's backward also starts the all-reduce, bucket by bucket.
      model.backward(loss_fn.grad());
      done(StepPhase::kBackward);
    }
  }
  model.synchronize_gradients();
  done(StepPhase::kAllreduce);
  {
    Timeline::Span span(hooks.timeline, kOptimizer, "optimizer");
    // Flagged before clipping: a NaN would make the norm, and so every gradient, NaN.
    if (hooks.guard) hooks.guard->flag(model, optimizer, step + 1);
    // The clip's factor is applied by the update as it reads each gradient: the bits of
    // scaling the gradients first, in one pass over the arena instead of two.
    optimizer.scale_gradients_by(hooks.grad_clip > 0.0f ? &model.gradient_clip_factor(hooks.grad_clip) : nullptr);
    if (hooks.shard_copies) hooks.shard_copies->keep_previous(step, optimizer.steps());
    // A background checkpoint's snapshot may still be reading the parameters and state.
    if (hooks.checkpoint_snapshot) hooks.checkpoint_snapshot->guard_overwrites();
    optimizer.step();
    optimizer.scale_gradients_by(nullptr);  // this step's factor, not a later caller's step
    if (hooks.shard_copies) hooks.shard_copies->updated(step + 1, optimizer.steps());
    model.gather_parameters();  // sharded: every replica's updated shard, to every replica
    if (hooks.guard && hooks.guard->settles_every_step())
      hooks.guard->settle(optimizer, [&](int64_t) -> std::optional<float> { return step_loss(result.losses); });
    if (hooks.shard_copies) hooks.shard_copies->exchange(optimizer.steps());
  }
  done(StepPhase::kOptimizer);
  return result;
}

}  // namespace mirrored::train
