#include "mirrored/train/train_step.h"

#include "mirrored/train/non_finite_guard.h"

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
  StepResult result;
  model.zero_grad();
  for (int micro = 0; micro < micro_batches; ++micro) {
    model.set_step(step * micro_batches + micro);  // dropout masks are keyed by it
    const distribute::Batch* batch;
    {
      Timeline::Span span(hooks.timeline, kData, "data");
      batch = &next_batch();
    }
    done(StepPhase::kData);
    const auto value = loss_fn.forward(model.forward(batch->images, nn::Mode::kTrain), batch->labels);
    done(StepPhase::kForward);
    // The last micro-batch's backward also starts the all-reduce, bucket by bucket.
    model.backward(loss_fn.grad());
    done(StepPhase::kBackward);
    result.loss += value.mean_loss;
  }
  result.loss /= static_cast<float>(micro_batches);
  model.synchronize_gradients();
  done(StepPhase::kAllreduce);
  {
    Timeline::Span span(hooks.timeline, kOptimizer, "optimizer");
    result.updated = hooks.guard == nullptr || hooks.guard->allow_update(model.parameters(), step + 1, result.loss);
    if (result.updated) optimizer.step();
    model.gather_parameters();  // sharded: every replica's updated shard, to every replica
  }
  done(StepPhase::kOptimizer);
  return result;
}

}  // namespace mirrored::train
