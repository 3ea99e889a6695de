#include "mirrored/train/trainer.h"

#include <algorithm>
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
#include "mirrored/train/non_finite_guard.h"
#include "mirrored/train/run_directory.h"
#include "mirrored/train/standard_callbacks.h"

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

  auto train_data = [&] {
    try {
      return strategy.distribute_dataset(train_set, {config.batch_size, config.seed, true});
    } catch (const InputError& e) {  // the sampler does not know which file it was given
      throw InputError(str_cat("data.train '", config.train_data, "': ", e.what()), e.code());
    }
  }();
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
  callbacks.push_back(std::make_unique<Checkpointer>());  // after MetricsLogger: the eval record precedes it
  for (auto& callback : extra) callbacks.push_back(std::move(callback));

  const int64_t steps_per_epoch = train_data.steps_per_epoch();
  int64_t total_steps = config.epochs * steps_per_epoch;
  if (config.max_steps > 0) total_steps = std::min(total_steps, config.max_steps);
  TrainContext ctx{config, strategy, model, *optimizer, run_dir, steps_per_epoch, total_steps};
  TrainSummary summary;
  const ResumePoint resumed = restore_checkpoint(ctx);
  summary.steps = resumed.step;
  run_dir.open_metrics(resumed.step);
  NonFiniteGuard guard(config, strategy.is_chief());

  auto for_each_callback = [&](auto&& fn) {
    for (auto& callback : callbacks) fn(*callback);
  };

  auto train_step = [&](const distribute::Batch& batch) {
    model.zero_grad();
    const auto value = loss_fn.forward(model.forward(batch.images, nn::Mode::kTrain), batch.labels);
    model.backward(loss_fn.grad());
    model.synchronize_gradients();
    if (guard.allow_update(model.parameters(), summary.steps + 1, value.mean_loss)) optimizer->step();
    return value.mean_loss;
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
    const bool first_epoch = epoch == resumed.step / steps_per_epoch;
    for (const auto& batch : train_data.epoch(epoch, first_epoch ? resumed.step % steps_per_epoch : 0)) {
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
      // A checkpoint step is a log point too, so a run resumed from it logs the same records.
      if (summary.steps % config.log_every == 0 || epoch_done || checkpoint_step(config, summary.steps)) {
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
    end.eval = evaluate(strategy, model, test_data);
    strategy.check_replicas_in_sync(model);
    summary.final_test_loss = end.eval.loss;
    summary.final_test_accuracy = end.eval.accuracy;
    evaluated = true;
    for_each_callback([&](Callback& c) { c.on_epoch_end(ctx, end); });
  }
  if (!evaluated) {  // resumed from the run's last checkpoint: nothing left to train
    const EvalResult eval = evaluate(strategy, model, test_data);
    summary.final_test_loss = eval.loss;
    summary.final_test_accuracy = eval.accuracy;
  }
  if (guard.skipped() > 0)
    chief_info(str_cat("skipped ", guard.skipped(), " step(s) with NaN/Inf gradients (nan_policy = skip)"));
  if (timed_steps > 0) summary.samples_per_sec = static_cast<double>(timed_steps * config.batch_size) / timed_seconds;
  for_each_callback([&](Callback& c) { c.on_train_end(ctx, summary); });
  return summary;
}

}  // namespace mirrored::train
