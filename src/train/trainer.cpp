#include "mirrored/train/trainer.h"

#include <algorithm>
#include <memory>
#include <thread>

#include "mirrored/core/timer.h"
#include "mirrored/data/hdf5_dataset.h"
#include "mirrored/distribute/strategy.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/loss.h"
#include "mirrored/optim/optimizer.h"
#include "mirrored/train/evaluate.h"
#include "mirrored/train/model_factory.h"
#include "mirrored/train/optimizer_factory.h"
#include "mirrored/train/run_directory.h"
#include "mirrored/train/run_setup.h"
#include "mirrored/train/standard_callbacks.h"

namespace mirrored::train {
namespace {

// Sums over the steps between two log points, reduced across replicas at the point.
struct Interval {
  double loss_sum = 0.0;
  int64_t steps = 0;
  Stopwatch clock;
  void reset() {
    loss_sum = 0.0;
    steps = 0;
    clock.reset();
  }
};

}  // namespace

TrainSummary run_training(const TrainConfig& config, distribute::Runtime& runtime,
                          std::vector<std::unique_ptr<Callback>> extra) {
  distribute::MirroredStrategy strategy(runtime);
  strategy.per_replica_batch(config.batch_size);  // fails fast, on every rank, before any I/O
  kernels::set_cpu_threads(threads_per_rank(config, runtime.cluster()));

  const auto train_set = load_dataset(config.train_data);
  const auto test_set = load_dataset(config.test_data);
  if (test_set->sample_shape != train_set->sample_shape)
    throw InputError(str_cat("data.test '", config.test_data, "' has samples of shape ",
                             shape_str(test_set->sample_shape), " but data.train '", config.train_data, "' has ",
                             shape_str(train_set->sample_shape)));

  auto train_data = strategy.distribute_dataset(train_set, {config.batch_size, config.seed, true});
  auto test_data = strategy.distribute_eval_dataset(test_set, config.eval_batch_size);
  auto model = strategy.scope([&] { return make_model(config, train_set->sample_shape, train_set->num_classes); },
                              {train_set->sample_shape, config.seed});
  auto optimizer = make_optimizer(config, model.parameters());
  nn::CrossEntropyLoss loss_fn;
  RunDirectory run_dir(config, strategy.is_chief());

  std::vector<std::unique_ptr<Callback>> callbacks;
  callbacks.push_back(std::make_unique<MetricsLogger>());
  callbacks.push_back(std::make_unique<ConsoleLogger>());
  callbacks.push_back(std::make_unique<FinalParametersWriter>());
  for (auto& callback : extra) callbacks.push_back(std::move(callback));

  const int64_t steps_per_epoch = train_data.steps_per_epoch();
  int64_t total_steps = config.epochs * steps_per_epoch;
  if (config.max_steps > 0) total_steps = std::min(total_steps, config.max_steps);
  TrainContext ctx{config, strategy, model, *optimizer, run_dir, steps_per_epoch, total_steps};
  auto for_each_callback = [&](auto&& fn) {
    for (auto& callback : callbacks) fn(*callback);
  };

  TrainSummary summary;
  auto train_step = [&](const distribute::Batch& batch) {
    model.set_step(summary.steps);
    model.zero_grad();
    const auto value = loss_fn.forward(model.forward(batch.images, nn::Mode::kTrain), batch.labels);
    model.backward(loss_fn.grad());
    model.synchronize_gradients();
    optimizer->step();
    return value.mean_loss;
  };

  for_each_callback([&](Callback& c) { c.on_train_begin(ctx); });
  double timed_seconds = 0.0;  // step time after step 0, which pays one-time costs
  int64_t timed_steps = 0;
  for (int64_t epoch = 0; epoch < config.epochs && summary.steps < total_steps && !ctx.stop_training; ++epoch) {
    Interval interval;
    double epoch_loss_sum = 0.0, epoch_seconds = 0.0;
    int64_t epoch_steps = 0;
    for (const auto& batch : train_data.epoch(epoch)) {
      Stopwatch step_clock;
      const float loss = strategy.run(train_step, batch);
      const double seconds = step_clock.seconds();
      epoch_seconds += seconds;
      if (summary.steps > 0) {
        timed_seconds += seconds;
        ++timed_steps;
      }
      ++summary.steps;
      ++epoch_steps;
      interval.loss_sum += loss;
      ++interval.steps;
      const StepEnd step_end{summary.steps, epoch, batch.step, loss, seconds};
      for_each_callback([&](Callback& c) { c.on_step_end(ctx, step_end); });

      const bool epoch_done = batch.step + 1 == steps_per_epoch || summary.steps == total_steps || ctx.stop_training;
      if (summary.steps % config.log_every == 0 || epoch_done) {
        LogPoint point;
        point.step = summary.steps;
        point.epoch = epoch;
        point.loss = strategy.reduce(distribute::ReduceOp::kMean, interval.loss_sum) /
                     static_cast<double>(interval.steps);
        point.lr = optimizer->lr();
        point.samples_per_sec = static_cast<double>(interval.steps * config.batch_size) / interval.clock.seconds();
        epoch_loss_sum += point.loss * static_cast<double>(interval.steps);
        for_each_callback([&](Callback& c) { c.on_log(ctx, point); });
        interval.reset();
      }
      if (epoch_done) break;
    }
    EpochEnd end;
    end.step = summary.steps;
    end.epoch = epoch;
    end.train_loss = epoch_loss_sum / static_cast<double>(std::max<int64_t>(epoch_steps, 1));
    end.seconds = epoch_seconds;
    end.samples_per_sec = static_cast<double>(epoch_steps * config.batch_size) / std::max(epoch_seconds, 1e-9);
    model.synchronize_buffers();  // one set of running statistics to evaluate and save
    end.eval = evaluate(strategy, model, test_data);
    strategy.check_replicas_in_sync(model);
    summary.final_test_loss = end.eval.loss;
    summary.final_test_accuracy = end.eval.accuracy;
    for_each_callback([&](Callback& c) { c.on_epoch_end(ctx, end); });
  }
  if (timed_steps > 0) summary.samples_per_sec = static_cast<double>(timed_steps * config.batch_size) / timed_seconds;
  for_each_callback([&](Callback& c) { c.on_train_end(ctx, summary); });
  return summary;
}

}  // namespace mirrored::train
