#include "mirrored/train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <thread>

#include "mirrored/core/log.h"
#include "mirrored/core/timer.h"
#include "mirrored/data/hdf5_dataset.h"
#include "mirrored/distribute/strategy.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/loss.h"
#include "mirrored/optim/optimizer.h"
#include "mirrored/train/checkpointer.h"
#include "mirrored/train/evaluate.h"
#include "mirrored/train/model_factory.h"
#include "mirrored/train/progress.h"
#include "mirrored/train/non_finite_guard.h"
#include "mirrored/train/optimizer_factory.h"
#include "mirrored/train/run_setup.h"
#include "mirrored/train/preemption.h"
#include "mirrored/train/run_directory.h"
#include "mirrored/train/standard_callbacks.h"
#include "mirrored/train/timeline_writer.h"
#include "mirrored/train/tensorboard_logger.h"

namespace mirrored::train {
namespace {

distribute::ReducerOptions reducer_options(const TrainConfig& config) {
  distribute::ReducerOptions options;
  options.caps.bucket_bytes = static_cast<int64_t>(config.bucket_mb * 1024 * 1024);
  options.caps.first_bucket_bytes = std::min<int64_t>(options.caps.bucket_bytes, int64_t{1} << 20);
  options.overlap = config.overlap ? distribute::Overlap::kThread : distribute::Overlap::kOff;
  options.compression =
      config.grad_compression == "bf16" ? distribute::GradCompression::kBf16 : distribute::GradCompression::kNone;
  return options;
}

// Sums over the steps between two log points, reduced across replicas at the point.
struct Interval {
  double loss_sum = 0.0;
  double comm_seconds = 0.0;
  double exposed_seconds = 0.0;
  int64_t steps = 0;
  Stopwatch clock;
  void reset() { *this = Interval{}; }
};

}  // namespace

TrainSummary run_training(const TrainConfig& config, distribute::Runtime& runtime,
                          std::vector<std::unique_ptr<Callback>> extra) {
  distribute::MirroredStrategy strategy(runtime, {distribute::allreduce_from_name(config.allreduce)});
  strategy.per_replica_batch(config.batch_size);  // fails fast, on every rank, before any I/O
  kernels::set_cpu_threads(threads_per_rank(config, runtime.cluster()));

  const auto train_set = load_dataset(config.train_data);
  const auto test_set = load_dataset(config.test_data);
  if (test_set->sample_shape != train_set->sample_shape)
    throw InputError(str_cat("data.test '", config.test_data, "' has samples of shape ",
                             shape_str(test_set->sample_shape), " but data.train '", config.train_data, "' has ",
                             shape_str(train_set->sample_shape)));
  const auto train_options = training_data_options(config, train_set->sample_shape);

  auto train_data = [&] {
    try {
      return strategy.distribute_dataset(train_set, train_options);
    } catch (const InputError& e) {  // the sampler does not know which file it was given
      throw InputError(str_cat("data.train '", config.train_data, "': ", e.what()), e.code());
    }
  }();
  auto test_data = strategy.distribute_eval_dataset(test_set, config.eval_batch_size);
  const int micro_batches = static_cast<int>(config.accumulate_steps);
  auto model = strategy.scope([&] { return make_model(config, train_set->sample_shape, train_set->num_classes); },
                              {train_set->sample_shape, config.seed, reducer_options(config), micro_batches});
  Timeline timeline;
  if (!config.timeline.empty()) model.set_timeline(&timeline);
  auto optimizer = make_optimizer(config, model.parameters());
  nn::CrossEntropyLoss loss_fn;
  RunDirectory run_dir(config, strategy.is_chief());

  std::vector<std::unique_ptr<Callback>> callbacks;
  callbacks.push_back(std::make_unique<MetricsLogger>());
  callbacks.push_back(std::make_unique<TensorBoardLogger>());
  // Before ConsoleLogger, so a finished bar ends its line before the epoch summary prints.
  callbacks.push_back(std::make_unique<ProgressReporter>(
      resolve_progress_style(config.progress, config.quiet, isatty(fileno(stderr)) == 1)));
  callbacks.push_back(std::make_unique<ConsoleLogger>());
  callbacks.push_back(std::make_unique<FinalParametersWriter>());
  callbacks.push_back(std::make_unique<Checkpointer>());  // after MetricsLogger: the eval record precedes it
  if (config.preemption_signal != "none")
    callbacks.push_back(std::make_unique<PreemptionHandler>(config.preemption_signal));
  for (auto& callback : extra) callbacks.push_back(std::move(callback));

  // A step is one update: `accumulate_steps` micro-batches of the global batch.
  const int64_t steps_per_epoch = train_data.steps_per_epoch() / micro_batches;
  if (steps_per_epoch == 0)
    throw InputError(str_cat("accumulate_steps = ", micro_batches, " x batch_size = ", config.batch_size,
                             " needs more samples than data.train '", config.train_data, "' has (",
                             train_set->size, ")"),
                     ExitCode::kUsage);
  const int64_t samples_per_step = config.batch_size * micro_batches;
  int64_t total_steps = config.epochs * steps_per_epoch;
  if (config.max_steps > 0) total_steps = std::min(total_steps, config.max_steps);
  const optim::LrSchedule lr_schedule = make_lr_schedule(config, steps_per_epoch);
  TrainContext ctx{config, strategy, model, *optimizer, run_dir, steps_per_epoch, total_steps};
  TrainSummary summary;
  const ResumePoint resumed = restore_checkpoint(ctx);
  summary.steps = resumed.step;
  run_dir.open_metrics(resumed.step);
  NonFiniteGuard guard(config, strategy.is_chief());

  auto for_each_callback = [&](auto&& fn) {
    for (auto& callback : callbacks) fn(*callback);
  };

  // One micro-batch: forward, loss, backward. The last micro-batch of a step also starts
  // the gradient all-reduce, bucket by bucket, as backward proceeds.
  auto micro_step = [&](const distribute::Batch& batch) {
    const auto value = loss_fn.forward(model.forward(batch.images, nn::Mode::kTrain), batch.labels);
    model.backward(loss_fn.grad());
    return value.mean_loss;
  };
  // The end of a step: wait for the averaged gradients, then update (unless the NaN guard
  // skips this step).
  auto finish_step = [&](float step_loss) {
    model.synchronize_gradients();
    static const std::string kOptimizer = "optimizer";
    Timeline::Span span(&timeline, kOptimizer, "optimizer");
    if (guard.allow_update(model.parameters(), summary.steps + 1, step_loss)) optimizer->step();
  };

  for_each_callback([&](Callback& c) { c.on_train_begin(ctx); });
  double timed_seconds = 0.0;  // step time after step 0, which pays one-time costs
  int64_t timed_steps = 0;
  bool evaluated = false;
  // A resumed run starts at (step / steps_per_epoch, step % steps_per_epoch): the data order
  // is a function of (seed, epoch), so the step count is the whole position.
  for (int64_t epoch = resumed.step / steps_per_epoch;
       epoch < config.epochs && summary.steps < total_steps && !ctx.stop_training; ++epoch) {
    Interval interval;
    double epoch_loss_sum = 0.0, epoch_seconds = 0.0;
    int64_t epoch_steps = 0;
    // A resumed run starts its first epoch at the step after the checkpoint.
    const int64_t first_step = epoch == resumed.step / steps_per_epoch ? resumed.step % steps_per_epoch : 0;
    auto batches = train_data.epoch(epoch, first_step * micro_batches);
    auto next_batch = batches.begin();
    for (int64_t step_in_epoch = first_step; step_in_epoch < steps_per_epoch; ++step_in_epoch) {
      timeline.set_recording(!config.timeline.empty() && summary.steps >= 1 &&
                             summary.steps <= config.timeline_steps);
      Stopwatch step_clock;
      float loss = 0.0f;
      optimizer->set_lr(static_cast<float>(lr_schedule.lr_at(summary.steps)));
      model.zero_grad();
      for (int micro = 0; micro < micro_batches; ++micro, ++next_batch) {
        model.set_step(summary.steps * micro_batches + micro);  // dropout masks are keyed by it
        const distribute::Batch* batch;
        {
          static const std::string kData = "data";
          Timeline::Span span(&timeline, kData, "data");
          batch = &*next_batch;
        }
        loss += strategy.run(micro_step, *batch);
      }
      loss /= static_cast<float>(micro_batches);
      strategy.run(finish_step, loss);
      const double seconds = step_clock.seconds();
      epoch_seconds += seconds;
      if (summary.steps > 0) {
        timed_seconds += seconds;
        ++timed_steps;
      }
      ++summary.steps;
      ++epoch_steps;
      interval.loss_sum += loss;
      interval.comm_seconds += model.comm_stats().comm_seconds;
      interval.exposed_seconds += model.comm_stats().exposed_seconds;
      ++interval.steps;
      const StepEnd step_end{summary.steps, epoch, step_in_epoch, loss, seconds};
      for_each_callback([&](Callback& c) { c.on_step_end(ctx, step_end); });

      const bool epoch_done =
          step_in_epoch + 1 == steps_per_epoch || summary.steps == total_steps || ctx.stop_training;
      // A checkpoint step is a log point too, so a run resumed from it logs the same records.
      if (summary.steps % config.log_every == 0 || epoch_done || checkpoint_step(config, summary.steps)) {
        LogPoint point;
        point.step = summary.steps;
        point.epoch = epoch;
        point.loss = strategy.reduce(distribute::ReduceOp::kMean, interval.loss_sum) /
                     static_cast<double>(interval.steps);
        point.lr = optimizer->lr();
        point.samples_per_sec = static_cast<double>(interval.steps * samples_per_step) / interval.clock.seconds();
        point.comm_ms = 1e3 * interval.comm_seconds / static_cast<double>(interval.steps);
        point.exposed_comm_ms = 1e3 * interval.exposed_seconds / static_cast<double>(interval.steps);
        epoch_loss_sum += point.loss * static_cast<double>(interval.steps);
        for_each_callback([&](Callback& c) { c.on_log(ctx, point); });
        interval.reset();
      }
      if (epoch_done) break;
    }
    if (ctx.preempted) break;  // the checkpoint is written; leave before evaluating
    EpochEnd end;
    end.step = summary.steps;
    end.epoch = epoch;
    end.train_loss = epoch_loss_sum / static_cast<double>(std::max<int64_t>(epoch_steps, 1));
    end.seconds = epoch_seconds;
    end.samples_per_sec = static_cast<double>(epoch_steps * samples_per_step) / std::max(epoch_seconds, 1e-9);
    model.synchronize_buffers();  // one set of running statistics to evaluate and save
    end.eval = evaluate(strategy, model, test_data);
    strategy.check_replicas_in_sync(model);
    summary.final_test_loss = end.eval.loss;
    summary.final_test_accuracy = end.eval.accuracy;
    evaluated = true;
    for_each_callback([&](Callback& c) { c.on_epoch_end(ctx, end); });
  }
  if (ctx.preempted) {  // no final evaluation or files: the requeued run finishes the job
    summary.preempted = true;
    return summary;
  }
  if (!evaluated) {  // resumed from the run's last checkpoint: nothing left to train
    const EvalResult eval = evaluate(strategy, model, test_data);
    summary.final_test_loss = eval.loss;
    summary.final_test_accuracy = eval.accuracy;
  }
  if (guard.skipped() > 0)
    chief_info(str_cat("skipped ", guard.skipped(), " step(s) with NaN/Inf gradients (nan_policy = skip)"));
  if (timed_steps > 0) summary.samples_per_sec = static_cast<double>(timed_steps * samples_per_step) / timed_seconds;
  if (!config.timeline.empty()) {
    timeline.set_recording(false);
    write_timeline(config.timeline, timeline, strategy.communicator());
  }
  for_each_callback([&](Callback& c) { c.on_train_end(ctx, summary); });
  return summary;
}

}  // namespace mirrored::train
