#include "mirrored/train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
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
#include "mirrored/train/progress.h"
#include "mirrored/train/run_directory.h"
#include "mirrored/train/standard_callbacks.h"
#include "mirrored/train/tensorboard_logger.h"

namespace mirrored::train {
namespace {

int threads_per_rank(const TrainConfig& config, const distribute::Cluster& cluster) {
  if (config.threads > 0) return static_cast<int>(config.threads);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, cluster.local_size()));
}

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& config, nn::ParameterArena& arena) {
  if (config.optimizer == "sgd") {
    return std::make_unique<optim::Sgd>(
        arena, kernels::SgdHyper{static_cast<float>(config.lr), static_cast<float>(config.momentum),
                                 static_cast<float>(config.weight_decay), false});
  }
  kernels::AdamHyper hyper;
  hyper.lr = static_cast<float>(config.lr);
  hyper.beta1 = static_cast<float>(config.beta1);
  hyper.beta2 = static_cast<float>(config.beta2);
  hyper.eps = static_cast<float>(config.eps);
  hyper.weight_decay = static_cast<float>(config.weight_decay);
  hyper.decoupled_weight_decay = config.optimizer == "adamw";
  return std::make_unique<optim::Adam>(arena, hyper);
}

std::shared_ptr<const data::Dataset> load(const std::string& path) {
  return std::make_shared<const data::Dataset>(data::load_hdf5_dataset(path));
}

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

  const auto train_set = load(config.train_data);
  const auto test_set = load(config.test_data);
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
  callbacks.push_back(std::make_unique<TensorBoardLogger>());
  // Before ConsoleLogger, so a finished bar ends its line before the epoch summary prints.
  callbacks.push_back(std::make_unique<ProgressReporter>(
      resolve_progress_style(config.progress, config.quiet, isatty(fileno(stderr)) == 1)));
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

  double allreduce_wait_seconds = 0.0;  // since the last log point
  auto train_step = [&](const distribute::Batch& batch) {
    model.zero_grad();
    const auto value = loss_fn.forward(model.forward(batch.images, nn::Mode::kTrain), batch.labels);
    model.backward(loss_fn.grad());
    const Stopwatch wait_clock;
    model.synchronize_gradients();
    allreduce_wait_seconds += wait_clock.seconds();
    optimizer->step();
    return value.mean_loss;
  };

  for_each_callback([&](Callback& c) { c.on_train_begin(ctx); });
  TrainSummary summary;
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
        point.allreduce_wait_ms = 1e3 * strategy.reduce(distribute::ReduceOp::kMean, allreduce_wait_seconds) /
                                  static_cast<double>(interval.steps);
        allreduce_wait_seconds = 0.0;
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
