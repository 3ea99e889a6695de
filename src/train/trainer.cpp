#include "mirrored/train/trainer.h"

#include <algorithm>
#include <optional>

#include "mirrored/core/log.h"
#include "mirrored/core/timer.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/loss.h"
#include "mirrored/train/checkpointer.h"
#include "mirrored/train/evaluate.h"
#include "mirrored/train/memory_report.h"
#include "mirrored/train/model_factory.h"
#include "mirrored/train/non_finite_guard.h"
#include "mirrored/train/optimizer_factory.h"
#include "mirrored/train/run_directory.h"
#include "mirrored/train/run_setup.h"
#include "mirrored/train/timeline_writer.h"
#include "mirrored/train/train_step.h"

namespace mirrored::train {
namespace {

// Sums over the steps between two log points, reduced across replicas at the point.
struct Interval {
  double loss_sum = 0.0;
  double comm_seconds = 0.0;
  double exposed_seconds = 0.0;
  int64_t steps = 0;
  Stopwatch clock;
};

// Sums over one epoch's steps.
struct EpochTotals {
  double loss_sum = 0.0;
  double seconds = 0.0;
  int64_t steps = 0;
};

std::shared_ptr<const data::Dataset> load_test_set(const TrainConfig& config, const data::Dataset& train_set) {
  auto test_set = load_dataset(config.test_data);
  if (test_set->sample_shape != train_set.sample_shape)
    throw InputError(str_cat("data.test '", config.test_data, "' has samples of shape ",
                             shape_str(test_set->sample_shape), " but data.train '", config.train_data, "' has ",
                             shape_str(train_set.sample_shape)));
  return test_set;
}

}  // namespace

// The training batches of one epoch, one at a time. The dataset reuses its Batch, so the
// iterator advances only when the next batch is asked for.
class Trainer::BatchStream {
 public:
  BatchStream(distribute::DistributedDataset& data, int64_t epoch, int64_t first_batch)
      : range_(data.epoch(epoch, first_batch)), it_(range_.begin()) {}
  const distribute::Batch& next() {
    if (started_) ++it_;
    started_ = true;
    return *it_;
  }

 private:
  distribute::DistributedDataset::EpochRange range_;
  distribute::DistributedDataset::EpochRange::Iterator it_;
  bool started_ = false;
};

struct Trainer::State {
  State(const TrainConfig& c, distribute::Runtime& runtime, TrainerOptions o)
      : config(c), options(o), lib(library_options(c)), strategy(runtime, lib.strategy) {}
  void load_data();
  void plan_steps();

  TrainConfig config;
  TrainerOptions options;
  LibraryOptions lib;
  distribute::MirroredStrategy strategy;
  std::shared_ptr<const data::Dataset> train_set;
  std::optional<distribute::DistributedDataset> train_data;
  std::optional<distribute::EvalDataset> test_data;  // when evaluating
  std::optional<distribute::DistributedModel> model;
  Timeline timeline;
  std::unique_ptr<optim::Optimizer> optimizer;
  nn::CrossEntropyLoss loss_fn;
  std::optional<RunDirectory> run_dir;
  int64_t steps_per_epoch = 0;
  int64_t total_steps = 0;
  int64_t epochs = 0;
  int64_t samples_per_step = 0;
  std::optional<optim::LrSchedule> lr_schedule;
  std::optional<TrainContext> ctx;
  std::optional<NonFiniteGuard> guard;
  std::vector<std::unique_ptr<Callback>> callbacks;
  ResumePoint resumed;
  TrainSummary summary;
  Interval interval;
  EpochTotals epoch_totals;
  double timed_seconds = 0.0;  // step time after step 0, which pays one-time costs
  int64_t timed_steps = 0;
  bool evaluated = false;
};

// The training (and, when evaluating, test) data, sharded for this replica.
void Trainer::State::load_data() {
  train_set = load_dataset(config.train_data);
  const auto test_set = options.evaluate ? load_test_set(config, *train_set) : nullptr;
  check_augment_fits(lib.train_data.augment, train_set->sample_shape, config.train_data);
  try {
    train_data.emplace(strategy.distribute_dataset(train_set, lib.train_data));
  } catch (const InputError& e) {  // the sampler does not know which file it was given
    throw InputError(str_cat("data.train '", config.train_data, "': ", e.what()), e.code());
  }
  if (test_set) test_data.emplace(strategy.distribute_eval_dataset(test_set, config.eval_batch_size));
}

// Steps per epoch and in total. A step is one update: `accumulate_steps` micro-batches of
// the global batch.
void Trainer::State::plan_steps() {
  const int64_t micro_batches = lib.accumulate_steps;
  steps_per_epoch = train_data->steps_per_epoch() / micro_batches;
  if (steps_per_epoch == 0)
    throw InputError(str_cat("accumulate_steps = ", micro_batches, " x batch_size = ", config.batch_size,
                             " needs more samples than data.train '", config.train_data, "' has (", train_set->size,
                             ")"),
                     ExitCode::kUsage);
  samples_per_step = config.batch_size * micro_batches;
  epochs = config.epochs;
  total_steps = config.epochs * steps_per_epoch;
  if (config.max_steps > 0) total_steps = std::min(total_steps, config.max_steps);
  if (options.steps > 0) {
    total_steps = options.steps;
    epochs = std::max(epochs, (options.steps + steps_per_epoch - 1) / steps_per_epoch);
  }
}

Trainer::Trainer(const TrainConfig& config, distribute::Runtime& runtime, TrainerOptions options)
    : s_(std::make_unique<State>(config, runtime, options)) {
  State& s = *s_;
  s.strategy.per_replica_batch(config.batch_size);  // fails fast, on every rank, before any I/O
  kernels::set_cpu_threads(threads_per_rank(config.threads, runtime.cluster()));
  s.load_data();
  const data::Dataset& train_set = *s.train_set;
  s.model.emplace(s.strategy.scope(
      [&] { return build_model(s.lib.model, train_set.sample_shape, train_set.num_classes); },
      {train_set.sample_shape, config.seed, s.lib.reducer, s.lib.accumulate_steps}));
  if (!config.timeline.empty()) s.model->set_timeline(&s.timeline);
  s.optimizer = make_optimizer(s.lib.optimizer, s.model->parameters(), s.model->optimizer_shard());
  s.run_dir.emplace(s.config, s.strategy.is_chief() && options.write_files);
  s.plan_steps();
  s.lr_schedule.emplace(s.lib.lr_schedule.in_steps(s.steps_per_epoch));
  s.ctx.emplace(TrainContext{s.config, s.strategy, *s.model, *s.optimizer, *s.run_dir, s.steps_per_epoch, s.total_steps});
  s.guard.emplace(s.config, s.strategy.is_chief());
}

Trainer::~Trainer() = default;

void Trainer::add_callback(std::unique_ptr<Callback> callback) { s_->callbacks.push_back(std::move(callback)); }
const TrainConfig& Trainer::config() const { return s_->config; }
const LibraryOptions& Trainer::library() const { return s_->lib; }
distribute::MirroredStrategy& Trainer::strategy() { return s_->strategy; }
distribute::DistributedModel& Trainer::model() { return *s_->model; }
int64_t Trainer::steps_per_epoch() const { return s_->steps_per_epoch; }

template <typename Fn>
void Trainer::for_each_callback(Fn&& fn) {
  for (auto& callback : s_->callbacks) fn(*callback);
}

TrainSummary Trainer::fit() {
  State& s = *s_;
  begin();
  // A resumed run starts at (step / steps_per_epoch, step % steps_per_epoch): the data order
  // is a function of (seed, epoch), so the step count is the whole position.
  for (int64_t epoch = s.resumed.step / s.steps_per_epoch;
       epoch < s.epochs && s.summary.steps < s.total_steps && !s.ctx->stop_training; ++epoch) {
    run_epoch(epoch);
    if (s.ctx->preempted) break;  // the checkpoint is written; leave before evaluating
  }
  return finish();
}

void Trainer::begin() {
  State& s = *s_;
  if (s.options.write_files) s.resumed = restore_checkpoint(*s.ctx);
  s.summary.steps = s.resumed.step;
  s.run_dir->open_metrics(s.resumed.step);
  const MemoryFootprint memory =
      report_memory(s.strategy.communicator(), memory_footprint(*s.model, *s.optimizer));
  if (s.resumed.step == 0) s.run_dir->log_metrics(memory_record(memory));
  for_each_callback([&](Callback& c) { c.on_train_begin(*s.ctx); });
}

void Trainer::run_epoch(int64_t epoch) {
  State& s = *s_;
  s.interval = Interval{};
  s.epoch_totals = EpochTotals{};
  // A resumed run starts its first epoch at the step after the checkpoint.
  const int64_t first_step =
      epoch == s.resumed.step / s.steps_per_epoch ? s.resumed.step % s.steps_per_epoch : 0;
  BatchStream batches(*s.train_data, epoch, first_step * s.lib.accumulate_steps);
  for (int64_t step_in_epoch = first_step; step_in_epoch < s.steps_per_epoch; ++step_in_epoch) {
    step(epoch, step_in_epoch, batches);
    const bool epoch_done =
        step_in_epoch + 1 == s.steps_per_epoch || s.summary.steps == s.total_steps || s.ctx->stop_training;
    // A checkpoint step is a log point too, so a run resumed from it logs the same records.
    if (s.summary.steps % s.config.log_every == 0 || epoch_done || checkpoint_step(s.config, s.summary.steps))
      log_point(epoch);
    if (epoch_done) break;
  }
  if (!s.ctx->preempted && s.options.evaluate) end_epoch(epoch);
}

StepEnd Trainer::step(int64_t epoch, int64_t step_in_epoch, BatchStream& batches) {
  State& s = *s_;
  TrainContext& ctx = *s.ctx;
  s.timeline.set_recording(!s.config.timeline.empty() && s.summary.steps >= 1 &&
                           s.summary.steps <= s.config.timeline_steps);
  for_each_callback([&](Callback& c) { c.on_step_begin(ctx, s.summary.steps); });
  Stopwatch step_clock;
  s.optimizer->set_lr(static_cast<float>(s.lr_schedule->lr_at(s.summary.steps)));
  StepHooks hooks;
  hooks.timeline = &s.timeline;
  hooks.guard = &*s.guard;
  hooks.phase_done = [&](StepPhase phase) { for_each_callback([&](Callback& c) { c.on_phase_end(ctx, phase); }); };
  const StepResult result = s.strategy.run(train_step, *s.model, *s.optimizer, s.loss_fn,
                                           [&]() -> const distribute::Batch& { return batches.next(); },
                                           s.summary.steps, hooks);
  const double seconds = step_clock.seconds();
  s.epoch_totals.seconds += seconds;
  if (s.summary.steps > 0) {
    s.timed_seconds += seconds;
    ++s.timed_steps;
  }
  ++s.summary.steps;
  ++s.epoch_totals.steps;
  s.interval.loss_sum += result.loss;
  s.interval.comm_seconds += s.model->comm_stats().comm_seconds;
  s.interval.exposed_seconds += s.model->comm_stats().exposed_seconds;
  ++s.interval.steps;
  const StepEnd end{s.summary.steps, epoch, step_in_epoch, result.loss, seconds};
  for_each_callback([&](Callback& c) { c.on_step_end(ctx, end); });
  return end;
}

void Trainer::log_point(int64_t epoch) {
  State& s = *s_;
  Interval& interval = s.interval;
  const auto steps = static_cast<double>(interval.steps);
  LogPoint point;
  point.step = s.summary.steps;
  point.epoch = epoch;
  point.loss = s.strategy.reduce(distribute::ReduceOp::kMean, interval.loss_sum) / steps;
  point.lr = s.optimizer->lr();
  point.samples_per_sec = static_cast<double>(interval.steps * s.samples_per_step) / interval.clock.seconds();
  point.comm_ms = 1e3 * interval.comm_seconds / steps;
  point.exposed_comm_ms = 1e3 * interval.exposed_seconds / steps;
  s.epoch_totals.loss_sum += point.loss * steps;
  for_each_callback([&](Callback& c) { c.on_log(*s.ctx, point); });
  interval = Interval{};
}

void Trainer::end_epoch(int64_t epoch) {
  State& s = *s_;
  const EpochTotals& totals = s.epoch_totals;
  EpochEnd end;
  end.step = s.summary.steps;
  end.epoch = epoch;
  end.train_loss = totals.loss_sum / static_cast<double>(std::max<int64_t>(totals.steps, 1));
  end.seconds = totals.seconds;
  end.samples_per_sec = static_cast<double>(totals.steps * s.samples_per_step) / std::max(totals.seconds, 1e-9);
  s.model->synchronize_buffers();  // one set of running statistics to evaluate and save
  end.eval = evaluate(s.strategy, *s.model, *s.test_data);
  s.strategy.check_replicas_in_sync(*s.model);
  s.summary.final_test_loss = end.eval.loss;
  s.summary.final_test_accuracy = end.eval.accuracy;
  s.evaluated = true;
  for_each_callback([&](Callback& c) { c.on_epoch_end(*s.ctx, end); });
}

TrainSummary Trainer::finish() {
  State& s = *s_;
  TrainSummary& summary = s.summary;
  if (s.ctx->preempted) {  // no final evaluation or files: the requeued run finishes the job
    summary.preempted = true;
    return summary;
  }
  if (!s.evaluated && s.options.evaluate) {  // resumed from the run's last checkpoint: nothing left to train
    const EvalResult eval = evaluate(s.strategy, *s.model, *s.test_data);
    summary.final_test_loss = eval.loss;
    summary.final_test_accuracy = eval.accuracy;
  }
  if (s.guard->skipped() > 0)
    chief_info(str_cat("skipped ", s.guard->skipped(), " step(s) with NaN/Inf gradients (nan_policy = skip)"));
  if (s.timed_steps > 0)
    summary.samples_per_sec = static_cast<double>(s.timed_steps * s.samples_per_step) / s.timed_seconds;
  if (!s.config.timeline.empty()) {
    s.timeline.set_recording(false);
    write_timeline(s.config.timeline, s.timeline, s.strategy.communicator());
  }
  for_each_callback([&](Callback& c) { c.on_train_end(*s.ctx, summary); });
  return summary;
}

}  // namespace mirrored::train
