#include "mirrored/train/trainer.h"

#include <cstdio>
#include <memory>
#include <thread>

#include "mirrored/core/log.h"
#include "mirrored/core/timer.h"
#include "mirrored/data/hdf5_dataset.h"
#include "mirrored/distribute/strategy.h"
#include "mirrored/io/params_file.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/builders.h"
#include "mirrored/nn/loss.h"
#include "mirrored/optim/optimizer.h"
#include "mirrored/train/evaluate.h"
#include "mirrored/train/run_directory.h"

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

std::string fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", digits, value);
  return text;
}

}  // namespace

TrainSummary run_training(const TrainConfig& config, distribute::Runtime& runtime) {
  distribute::MirroredStrategy strategy(runtime);
  const int replicas = strategy.num_replicas_in_sync();
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

  auto model = strategy.scope(
      [&] {
        return nn::mlp({config.hidden, train_set->num_classes});
      },
      {train_set->sample_shape, config.seed});
  auto optimizer = make_optimizer(config, model.parameters());
  nn::CrossEntropyLoss loss_fn;
  RunDirectory run_dir(config, strategy.is_chief());

  chief_info(str_cat("mirrored train: ", replicas, " replica(s) x ", train_data.per_replica_batch(),
                     " = global batch ", config.batch_size, ", ", train_data.steps_per_epoch(), " steps/epoch, ",
                     model.parameters().numel(), " parameters, ", kernels::cpu_threads(), " thread(s)/rank"));
  chief_verbose(model.module().summary());

  auto train_step = [&](const distribute::Batch& batch) {
    model.zero_grad();
    const auto value = loss_fn.forward(model.forward(batch.images, nn::Mode::kTrain), batch.labels);
    model.backward(loss_fn.grad());
    model.synchronize_gradients();
    optimizer->step();
    return value.mean_loss;
  };

  TrainSummary summary;
  double train_seconds = 0.0;     // step time after step 0, which pays one-time costs
  int64_t timed_steps = 0;
  const int64_t total_steps = config.max_steps > 0
                                  ? std::min(config.max_steps, config.epochs * train_data.steps_per_epoch())
                                  : config.epochs * train_data.steps_per_epoch();
  for (int64_t epoch = 0; epoch < config.epochs && summary.steps < total_steps; ++epoch) {
    Stopwatch epoch_clock, interval_clock;
    double interval_loss = 0.0, epoch_loss = 0.0;
    int64_t interval_steps = 0, epoch_steps = 0;
    for (const auto& batch : train_data.epoch(epoch)) {
      if (summary.steps >= total_steps) break;
      Stopwatch step_clock;
      const float loss = strategy.run(train_step, batch);
      if (summary.steps > 0) {
        train_seconds += step_clock.seconds();
        ++timed_steps;
      }
      interval_loss += loss;
      ++interval_steps;
      ++epoch_steps;
      ++summary.steps;
      const bool last_of_epoch = batch.step + 1 == train_data.steps_per_epoch() || summary.steps == total_steps;
      if (summary.steps % config.log_every == 0 || last_of_epoch) {
        const double mean_loss = strategy.reduce(distribute::ReduceOp::kMean, interval_loss) / static_cast<double>(interval_steps);
        const double rate = static_cast<double>(interval_steps * config.batch_size) / interval_clock.seconds();
        epoch_loss += mean_loss * static_cast<double>(interval_steps);
        run_dir.log_metrics({{"kind", std::string("train")},
                             {"step", summary.steps},
                             {"epoch", epoch + 1},
                             {"loss", mean_loss},
                             {"lr", static_cast<double>(optimizer->lr())},
                             {"samples_per_sec", rate}});
        chief_verbose(str_cat("  step ", summary.steps, "  loss ", fixed(mean_loss, 4), "  ",
                              fixed(rate, 0), " samples/s"));
        interval_loss = 0.0;
        interval_steps = 0;
        interval_clock.reset();
      }
    }
    const double epoch_seconds = epoch_clock.seconds();
    const EvalResult eval = evaluate(strategy, model, test_data);
    strategy.check_replicas_in_sync(model);
    summary.final_test_loss = eval.loss;
    summary.final_test_accuracy = eval.accuracy;
    const double epoch_rate = static_cast<double>(epoch_steps * config.batch_size) / epoch_seconds;
    run_dir.log_metrics({{"kind", std::string("eval")},
                         {"step", summary.steps},
                         {"epoch", epoch + 1},
                         {"test_loss", eval.loss},
                         {"test_accuracy", eval.accuracy},
                         {"test_samples", eval.samples}});
    chief_info(str_cat("epoch ", epoch + 1, "/", config.epochs, "  loss ",
                       fixed(epoch_loss / static_cast<double>(std::max<int64_t>(epoch_steps, 1)), 4), "  test_loss ",
                       fixed(eval.loss, 4), "  test_acc ", fixed(eval.accuracy, 4), "  ", fixed(epoch_rate, 0),
                       " samples/s  ", fixed(epoch_seconds, 2), " s"));
  }
  if (timed_steps > 0)
    summary.samples_per_sec = static_cast<double>(timed_steps * config.batch_size) / train_seconds;
  if (strategy.is_chief()) io::save_parameters(run_dir.file("final.h5"), model.parameters());
  chief_print(str_cat("final test accuracy: ", fixed(summary.final_test_accuracy, 4), "  (", summary.steps,
                      " steps, ", fixed(summary.samples_per_sec, 0), " samples/s over ", replicas, " replica(s))"));
  return summary;
}

}  // namespace mirrored::train
