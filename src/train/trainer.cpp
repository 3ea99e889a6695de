#include "mirrored/train/trainer.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>

#include "mirrored/checkpoint/checkpoint_writer.h"
#include "mirrored/checkpoint/init_from.h"
#include "mirrored/checkpoint/run_directory.h"
#include "mirrored/train/rank_table.h"
#include "mirrored/comm/failure/fault_tolerance.h"
#include "mirrored/comm/health/flight_recorder.h"
#include "mirrored/config/model_factory.h"
#include "mirrored/config/optimizer_factory.h"
#include "mirrored/config/run_setup.h"
#include "mirrored/core/host_memory.h"
#include "mirrored/core/log.h"
#include "mirrored/core/timer.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/loss.h"
#include "mirrored/train/checkpointer.h"
#include "mirrored/train/evaluate.h"
#include "mirrored/train/memory_report.h"
#include "mirrored/train/non_finite_guard.h"
#include "mirrored/train/step_losses.h"
#include "mirrored/train/straggler.h"
#include "mirrored/train/timeline_writer.h"
#include "mirrored/train/train_step.h"
#include "mirrored/train/training_data.h"

namespace mirrored::train {
namespace {

// Sums over the steps between two log points, reduced across replicas at the point. The
// losses stay on the device (StepLosses) until then.
struct Interval {
  int64_t first_index = 0;  // the epoch index of its first step
  double comm_seconds = 0.0;
  double exposed_seconds = 0.0;
  int64_t steps = 0;
  Stopwatch clock;
  // This rank's compute time per scored phase (straggler.h), summed over the interval's
  // steps after step 0 (which pays one-time costs); `compute_steps` of them.
  PhaseSeconds compute{};
  int64_t compute_steps = 0;
};

// A step phase's slot among the scored phases; -1 for the all-reduce (waiting for peers).
int scored_phase(StepPhase phase) {
  switch (phase) {
    case StepPhase::kData: return 0;
    case StepPhase::kForward: return 1;
    case StepPhase::kBackward: return 2;
    case StepPhase::kOptimizer: return 3;
    case StepPhase::kAllreduce: break;
  }
  return -1;
}

// Sums over one epoch's steps.
struct EpochTotals {
  double loss_sum = 0.0;
  double seconds = 0.0;
  int64_t steps = 0;
};

}  // namespace

struct Trainer::State {
  State(const config::TrainConfig& c, runtime::Runtime& runtime, TrainerOptions o)
      : config(c), options(o), lib(config::library_options(c)), strategy(runtime, lib.strategy) {}
  void load_data();
  void plan_steps();

  config::TrainConfig config;
  TrainerOptions options;
  config::LibraryOptions lib;
  distribute::MirroredStrategy strategy;
  std::unique_ptr<TrainingData> data;  // images or tokens, as the model needs
  std::optional<distribute::DistributedModel> model;
  Timeline timeline;
  std::unique_ptr<optim::Optimizer> optimizer;
  nn::CrossEntropyLoss loss_fn;
  std::optional<checkpoint::RunDirectory> run_dir;
  std::optional<checkpoint::CheckpointWriter> own_checkpoints;  // without TrainerOptions::checkpoints
  std::optional<LoadedDatasets> own_datasets;                   // without TrainerOptions::datasets
  int64_t steps_per_epoch = 0;
  int64_t total_steps = 0;
  int64_t epochs = 0;
  int64_t samples_per_step = 0;
  int64_t tokens_per_step = 0;  // 0: not a token model
  std::optional<optim::LrSchedule> lr_schedule;
  std::optional<TrainContext> ctx;
  std::optional<NonFiniteGuard> guard;
  StepLosses losses;          // this replica's losses of the current epoch, on the model's device
  int64_t current_epoch = -1;
  std::vector<std::unique_ptr<Callback>> callbacks;
  ResumePoint resumed;
  TrainSummary summary;
  Interval interval;
  EpochTotals epoch_totals;
  double timed_seconds = 0.0;  // step time after step 0, which pays one-time costs
  int64_t timed_steps = 0;
  bool evaluated = false;
  int64_t last_eval_step = -1;
  double interval_eval_seconds = 0.0;  // evaluation inside the current log interval, not training time
  EvalResult last_eval;
  std::optional<StragglerTracker> stragglers;
  std::optional<distribute::ShardCopies> shard_copies;  // sharded state under on_failure = shrink
};

// The training (and, when evaluating, test) data, sharded for this replica.
void Trainer::State::load_data() {
  if (!options.datasets) own_datasets.emplace(false);
  data = load_training_data(lib, strategy, options.evaluate, options.datasets ? *options.datasets : *own_datasets);
}

// Steps per epoch and in total. A step is one update: `accumulate_steps` micro-batches of
// the global batch.
void Trainer::State::plan_steps() {
  const int64_t micro_batches = lib.accumulate_steps;
  steps_per_epoch = data->batches_per_epoch() / micro_batches;
  if (steps_per_epoch == 0)
    throw InputError(str_cat("accumulate_steps = ", micro_batches, " x batch_size = ", config.batch_size,
                             " needs more samples than data.train '", lib.data.train, "' has (",
                             data->batches_per_epoch(), " batch(es) of ", config.batch_size, " per epoch)"),
                     ExitCode::kUsage);
  samples_per_step = config.batch_size * micro_batches;
  tokens_per_step = samples_per_step * data->tokens_per_sample();
  epochs = config.epochs;
  total_steps = config.epochs * steps_per_epoch;
  if (config.max_steps > 0) total_steps = std::min(total_steps, config.max_steps);
  if (options.steps > 0) {
    total_steps = options.steps;
    epochs = std::max(epochs, (options.steps + steps_per_epoch - 1) / steps_per_epoch);
  }
}

namespace {
// on_failure = shrink on GPUs is built (NCCL gives up on a lost peer, the survivors bootstrap
// a new communicator: comm/nccl_communicator.h) but has never run on a GPU, so it is refused
// at start-up, on every rank alike (exit 2), saying what is missing, until it has.
// MIRRORED_UNVERIFIED_GPU_SHRINK=1 lets it run, for that verification (it.gpu_device).
void refuse_unverified_gpu_shrink(const config::TrainConfig& config, const runtime::Runtime& runtime) {
  if (config.on_failure != config::OnFailure::kShrink || !runtime.device().is_cuda()) return;
  const char* opt_in = std::getenv("MIRRORED_UNVERIFIED_GPU_SHRINK");
  if (opt_in != nullptr && std::string(opt_in) == "1") {
    chief_print("on_failure = shrink on GPUs runs unverified (MIRRORED_UNVERIFIED_GPU_SHRINK=1)");
    return;
  }
  throw Error(ExitCode::kUsage,
              "on_failure = shrink with device = cuda has never run on GPUs: recovering from a lost GPU rank is "
              "built, but no machine with 2 or more GPUs and an Open MPI with ULFM has run its check yet "
              "(tests/integration/gpu_device.sh). Use on_failure = abort (the run resumes from its newest "
              "checkpoint) or device = cpu; MIRRORED_UNVERIFIED_GPU_SHRINK=1 runs it anyway, for that check",
              true);
}
}  // namespace

Trainer::Trainer(const config::TrainConfig& config, runtime::Runtime& runtime, TrainerOptions options)
    : s_(std::make_unique<State>(config, runtime, options)) {
  State& s = *s_;
  refuse_unverified_gpu_shrink(config, runtime);
  s.strategy.batch_plan(config.batch_size);  // fails fast, on every rank, before any I/O
  kernels::read_cpu_settings();
  kernels::set_cpu_thread_invariant(config.reduction == distribute::Reduction::kInvariant);
  kernels::set_cpu_threads(config::threads_per_rank(s.lib.threads, runtime.cluster()));
  s.load_data();
  const Shape sample_shape = s.data->sample_shape();
  s.model.emplace(
      s.strategy.scope([&] { return config::build_model(s.lib.model, sample_shape, s.data->num_classes()); },
                       {sample_shape, config.seed, s.lib.reducer, s.lib.accumulate_steps, config.batch_size}));
  config::warn_about_slow_precision(s.lib.model, runtime.device(), s.strategy.is_chief());
  if (!config.timeline.empty()) s.model->set_timeline(&s.timeline);
  s.optimizer = config::make_optimizer(s.lib.optimizer, s.model->parameters(), s.model->shard());
  s.run_dir.emplace(s.config, s.strategy.is_chief() && options.write_files);
  s.plan_steps();
  s.lr_schedule.emplace(s.lib.lr_schedule.in_steps(s.steps_per_epoch));
  s.ctx.emplace(TrainContext{s.config, s.strategy, *s.model, *s.optimizer, *s.run_dir, s.steps_per_epoch, s.total_steps});
  s.guard.emplace(s.config, s.strategy.is_chief());
  s.losses = StepLosses(s.model->parameters().flat_params().device(),
                        s.lib.accumulate_steps * s.model->virtual_replicas(), s.steps_per_epoch);
  s.ctx->guard = &*s.guard;
  if (!options.checkpoints) s.own_checkpoints.emplace(s.config);
  s.ctx->checkpoints = options.checkpoints ? options.checkpoints : &*s.own_checkpoints;
  // As many warm-up log points as the window: a run's first moments are uneven.
  s.stragglers.emplace(config.straggler_threshold, config.straggler_window, config.straggler_window);
  s.ctx->losses = &s.losses;
}

Trainer::~Trainer() = default;

void Trainer::add_callback(std::unique_ptr<Callback> callback) { s_->callbacks.push_back(std::move(callback)); }
distribute::MirroredStrategy& Trainer::strategy() { return s_->strategy; }
distribute::DistributedModel& Trainer::model() { return *s_->model; }

checkpoint::ReplicaSnapshot Trainer::snapshot() {
  State& s = *s_;
  checkpoint::ReplicaSnapshot snapshot;
  snapshot.checkpoint = capture_checkpoint(*s.ctx, s.summary.steps);
  const distribute::ShardPlan& plan = s.model->shard_plan();
  if (!plan.sharded()) {
    for (const auto& [name, tensor] : s.optimizer->state())
      snapshot.checkpoint.optimizer_state.push_back({name, {static_cast<int64_t>(tensor->numel())}, tensor->to_vector()});
    return snapshot;
  }
  MIRRORED_CHECK(s.shard_copies.has_value(), "a snapshot of sharded optimizer state needs its shard copies");
  for (const auto& entry : s.optimizer->state())
    snapshot.checkpoint.optimizer_state.push_back({entry.first, {plan.numel()}, {}});
  snapshot.shards = plan.replicas();
  snapshot.keeper_distance = s.shard_copies->distance();
  s.shard_copies->settle_after_failure();
  snapshot.pieces = s.shard_copies->pieces();
  return snapshot;
}

template <typename Fn>
void Trainer::for_each_callback(Fn&& fn) {
  for (auto& callback : s_->callbacks) fn(*callback);
}

TrainSummary Trainer::fit() {
  State& s = *s_;
  begin();
  if (s.resumed.finished) {  // said so; no training, evaluation or files
    s.summary.steps = s.resumed.step;
    s.summary.finished = true;
    return s.summary;
  }
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
  if (s.resumed.finished) return;
  if (s.resumed.step == 0 && !s.config.init_from.empty())
    checkpoint::initialize_from_file(s.ctx->config, s.ctx->strategy, s.ctx->model);
  s.summary.steps = s.resumed.step;
  s.run_dir->open_metrics(s.resumed.step);
  const MemoryFootprint memory =
      report_memory(s.strategy.communicator(), memory_footprint(*s.model, *s.optimizer));
  if (s.resumed.step == 0) s.run_dir->log_metrics(memory_record(memory));
  if (s.options.write_files)
    record_ranks(s.strategy.communicator(), *s.run_dir, s.strategy.is_chief(), s.resumed.step);
  keep_shard_copies();
  for_each_callback([&](Callback& c) { c.on_train_begin(*s.ctx); });
}

// on_failure = shrink with sharded optimizer state: every shard also on its keeper, from
// the first step on (shard_copies.h).
void Trainer::keep_shard_copies() {
  State& s = *s_;
  const distribute::ShardPlan& plan = s.model->shard_plan();
  if (s.config.on_failure != config::OnFailure::kShrink || !plan.sharded()) return;
  std::vector<const Tensor*> state;
  for (const auto& entry : s.optimizer->state()) state.push_back(entry.second);
  std::vector<std::string> hosts;
  for (const auto& placement : s.strategy.runtime().cluster().placements()) hosts.push_back(placement.host);
  const int distance = distribute::ShardCopies::keeper_distance(hosts);
  s.shard_copies.emplace(plan, s.strategy.communicator(), distance, s.model->parameters().flat_params(), state,
                         s.resumed.step, s.optimizer->steps());
  s.shard_copies->exchange(s.optimizer->steps());
  s.ctx->shard_copies = &*s.shard_copies;
  const size_t floats = s.shard_copies->floats_per_exchange();
  chief_info(str_cat("on_failure = shrink: each replica's optimizer shard is also kept by rank + ", distance,
                     " (mod ", plan.replicas(), "), ", bytes_str(static_cast<double>(floats * sizeof(float))),
                     " sent per step"));
}

void Trainer::run_epoch(int64_t epoch) {
  State& s = *s_;
  s.interval = Interval{};
  s.interval_eval_seconds = 0.0;
  s.epoch_totals = EpochTotals{};
  s.losses.restart();
  s.current_epoch = epoch;
  // A resumed run starts its first epoch at the step after the checkpoint.
  const int64_t first_step =
      epoch == s.resumed.step / s.steps_per_epoch ? s.resumed.step % s.steps_per_epoch : 0;
  s.data->start_epoch(epoch, first_step * s.lib.accumulate_steps);
  for (int64_t step_in_epoch = first_step; step_in_epoch < s.steps_per_epoch; ++step_in_epoch) {
    step(epoch, step_in_epoch);
    const bool epoch_done =
        step_in_epoch + 1 == s.steps_per_epoch || s.summary.steps == s.total_steps || s.ctx->stop_training;
    // A checkpoint step is a log point too, so a run resumed from it logs the same records.
    if (s.summary.steps % s.config.log_every == 0 || epoch_done ||
        checkpoint::checkpoint_step(s.config, s.summary.steps))
      log_point(epoch);
    if (s.options.evaluate && s.config.eval_every > 0 && !s.ctx->preempted &&
        (s.summary.steps % s.config.eval_every == 0 || s.summary.steps == s.total_steps))
      evaluate_now(epoch);
    if (epoch_done) break;
  }
  if (!s.ctx->preempted && s.options.evaluate) end_epoch(epoch);
}

StepEnd Trainer::step(int64_t epoch, int64_t step_in_epoch) {
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
  hooks.losses = s.losses.slots(step_in_epoch);
  hooks.grad_clip = static_cast<float>(s.config.grad_clip);
  hooks.shard_copies = s.shard_copies ? &*s.shard_copies : nullptr;
  hooks.checkpoint_snapshot = ctx.checkpoints ? ctx.checkpoints->device_snapshot_in_use() : nullptr;
  Stopwatch phase_clock;
  const bool timed = s.summary.steps > 0;
  hooks.phase_done = [&](StepPhase phase) {
    const int scored = scored_phase(phase);
    if (timed && scored >= 0) s.interval.compute[static_cast<size_t>(scored)] += phase_clock.seconds();
    for_each_callback([&](Callback& c) { c.on_phase_end(ctx, phase); });
    phase_clock.reset();
  };
  s.strategy.run(train_step, *s.model, *s.optimizer, s.loss_fn,
                 [&]() -> const distribute::Batch& { return s.data->next_batch(); },
                 s.summary.steps, hooks);
  const double seconds = step_clock.seconds();
  s.epoch_totals.seconds += seconds;
  if (s.summary.steps > 0) {
    s.timed_seconds += seconds;
    ++s.timed_steps;
  }
  ++s.summary.steps;
  ++s.epoch_totals.steps;
  if (s.interval.steps == 0) s.interval.first_index = step_in_epoch;
  s.interval.comm_seconds += s.model->comm_stats().comm_seconds;
  s.interval.exposed_seconds += s.model->comm_stats().exposed_seconds;
  ++s.interval.steps;
  if (timed) ++s.interval.compute_steps;
  if (auto* watchdog = s.strategy.runtime().watchdog()) watchdog->set_step(s.summary.steps);
  const StepEnd end{s.summary.steps, epoch, step_in_epoch, &s.losses, seconds};
  for_each_callback([&](Callback& c) { c.on_step_end(ctx, end); });
  return end;
}

// Reads what the device kept of the NaN/Inf guard's decisions and applies nan_policy.
void Trainer::settle_guard() {
  State& s = *s_;
  train::settle_guard(*s.guard, *s.optimizer, s.losses, s.current_epoch * s.steps_per_epoch, s.steps_per_epoch);
}

void Trainer::log_point(int64_t epoch) {
  State& s = *s_;
  settle_guard();  // before anything is reported or saved
  Interval& interval = s.interval;
  const auto steps = static_cast<double>(interval.steps);
  LogPoint point;
  point.step = s.summary.steps;
  point.epoch = epoch;
  // The interval's losses come to the host here: on a GPU the one wait for the step.
  const int64_t first = interval.first_index, last = interval.first_index + interval.steps;
  {
    comm::CallSite site("log point loss");
    if (s.strategy.reduction() == distribute::Reduction::kInvariant) {
      // The mean of every pass loss of every virtual replica: the same bits at any world size.
      const int64_t passes =
          interval.steps * s.lib.accumulate_steps * s.strategy.batch_plan(s.config.batch_size).groups();
      point.loss = s.strategy.reduce_exact(s.losses.pass_losses(first, last), passes) / static_cast<double>(passes);
    } else {
      // Weighted by this replica's share of the batch (1 unless a shrunk world splits it unevenly).
      point.loss = s.strategy.reduce(distribute::ReduceOp::kMean, s.losses.sum(first, last) * s.model->share_weight()) /
                   steps;
    }
  }
  // The same on every replica (clipped after the all-reduce): the last step's, not reduced.
  if (s.config.grad_clip > 0.0) point.grad_norm = s.model->gradient_norm().to_vector().at(0);
  point.lr = s.optimizer->lr();
  const double interval_seconds = std::max(interval.clock.seconds() - s.interval_eval_seconds, 1e-9);
  s.interval_eval_seconds = 0.0;
  point.samples_per_sec = static_cast<double>(interval.steps * s.samples_per_step) / interval_seconds;
  if (s.tokens_per_step > 0)
    point.tokens_per_sec = static_cast<double>(interval.steps * s.tokens_per_step) / interval_seconds;
  point.comm_ms = 1e3 * interval.comm_seconds / steps;
  point.exposed_comm_ms = 1e3 * interval.exposed_seconds / steps;
  point.world_size = s.strategy.num_replicas_in_sync();
  s.epoch_totals.loss_sum += point.loss * steps;
  score_stragglers(point);
  for_each_callback([&](Callback& c) { c.on_log(*s.ctx, point); });
  interval = Interval{};
}

// Collective (several replicas). Every rank's compute time per phase and step comes to
// every rank (one all-gather of a few numbers per log point), is scored against the median
// rank, and ranks below straggler.threshold for straggler.window points are flagged.
void Trainer::score_stragglers(LogPoint& point) {
  State& s = *s_;
  comm::Communicator& comm = s.strategy.communicator();
  if (comm.size() < 2) return;
  const Interval& interval = s.interval;
  constexpr size_t kFields = kScoredPhases + 1;  // the phases, then the steps timed
  const double steps = static_cast<double>(std::max<int64_t>(interval.compute_steps, 1));
  std::vector<double> mine(kFields);
  for (size_t p = 0; p < kScoredPhases; ++p) mine[p] = interval.compute[p] / steps;
  mine[kScoredPhases] = static_cast<double>(interval.compute_steps);
  std::vector<double> all(kFields * static_cast<size_t>(comm.size()));
  {
    comm::CallSite site("straggler times");
    comm.allgather(mine.data(), all.data(), kFields, comm::DataType::kF64);
  }
  std::vector<PhaseSeconds> seconds(static_cast<size_t>(comm.size()));
  for (size_t r = 0; r < seconds.size(); ++r) {
    if (all[r * kFields + kScoredPhases] < 1) return;  // only step 0 in this interval: nothing to score
    for (size_t p = 0; p < kScoredPhases; ++p) seconds[r][p] = all[r * kFields + p];
  }
  point.rank_scores = straggler_scores(seconds);
  point.stragglers = s.stragglers->update(point.rank_scores);
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
  // With eval_every = 0 each epoch ends with an evaluation; otherwise the step schedule has
  // evaluated, and the epoch reports the latest result.
  if (s.config.eval_every == 0 && s.last_eval_step != s.summary.steps) evaluate_now(epoch);
  end.eval = s.last_eval;
  for_each_callback([&](Callback& c) { c.on_epoch_end(*s.ctx, end); });
}

// Collective. Scores the evaluation set now and tells the callbacks.
void Trainer::evaluate_now(int64_t epoch) {
  State& s = *s_;
  Stopwatch clock;
  s.model->synchronize_buffers();  // one set of running statistics to evaluate and save
  record_eval(s.data->evaluate(s.strategy, *s.model));
  s.strategy.check_replicas_in_sync(*s.model);
  s.interval_eval_seconds += clock.seconds();
  const EvalPoint point{s.summary.steps, epoch, s.last_eval};
  for_each_callback([&](Callback& c) { c.on_evaluate(*s.ctx, point); });
}

void Trainer::record_eval(const EvalResult& eval) {
  State& s = *s_;
  s.last_eval = eval;
  s.last_eval_step = s.summary.steps;
  s.evaluated = true;
  s.summary.final_eval = eval;
  s.summary.final_test_loss = eval.loss;
  s.summary.final_test_accuracy = eval.accuracy;
}

TrainSummary Trainer::finish() {
  State& s = *s_;
  TrainSummary& summary = s.summary;
  if (s.ctx->preempted) {  // no final evaluation or files: the requeued run finishes the job
    summary.preempted = true;
    summary.interrupted = s.ctx->interrupted;
    summary.resize_requested = s.ctx->resize_requested;
    return summary;
  }
  if (!s.evaluated && s.options.evaluate) {  // resumed from the run's last checkpoint: nothing left to train
    s.model->synchronize_buffers();
    record_eval(s.data->evaluate(s.strategy, *s.model));
  }
  settle_guard();  // a no-op after the last log point, which settled already
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
