// mirrored bench train --config FILE [--steps N] [--warmup N] [--KEY VALUE ...]
//
// Runs the Trainer of `mirrored train` (same configuration, model, optimizer, reducer and
// data pipeline, and the same step) for warm-up + N steps, with a timing callback instead
// of the run's files, and reports the timed steps: ms/step, samples/s over all replicas,
// and where a step's time goes. Each phase is timed on every rank and averaged over ranks;
// "all-reduce" is the wait in synchronize_gradients(), so it also holds any time a rank
// spends waiting for a slower one. A second table splits the gradient communication into
// the wait for the slowest peer to start each bucket and the time inside the collective
// (CommStats, peer_wait_seconds). On a GPU the device is synchronised at each phase
// boundary, so the phases time work rather than kernel launches. No evaluation, no files.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <thread>
#include <vector>

#include "../commands.h"
#include "../parse_options.h"
#include "bench_scaling.h"
#include "sgemm_bound.h"
#include "mirrored/comm/health/flight_recorder.h"
#include "mirrored/config/library_options.h"
#include "mirrored/core/cpu_affinity.h"
#include "mirrored/core/log.h"
#include "mirrored/core/strings.h"
#include "mirrored/core/timer.h"
#include "mirrored/distribute/gradient_reducer.h"
#include "mirrored/distribute/strategy.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/kernels/synchronize.h"
#include "mirrored/train/trainer.h"

namespace mirrored::cli {
namespace {

struct BenchOptions {
  StepCounts counts{50, 5};
  bool scaling = false;  // also time 1 replica and print the scaling efficiency
  bool compare_reduction = false;  // time reduction = fast and invariant side by side
};

// What one timed run measured, for --compare-reduction's table.
struct RunFigures {
  double step_ms = 0.0;
  // Bytes each rank hands to the gradient all-reduce per step (the wire carries about
  // 2 (W-1)/W of it with a ring): float32 gradients in fast mode; int64 grid values plus
  // one int32 exponent per parameter tensor in invariant mode.
  int64_t allreduce_bytes = 0;
};

// The flight recorder's cost per collective, in nanoseconds: start and finish on a private
// recorder of `capacity` (0: the ring off, which still numbers and fingerprints each call).
// Timed apart from the steps, whose run-to-run noise on a shared host is far larger.
double recorder_ns_per_collective(size_t capacity) {
  comm::FlightRecorder recorder(capacity);
  const int channel = recorder.add_channel("gradients");
  const comm::CallSite site("gradient bucket", 1);
  constexpr int kCalls = 200000;
  Stopwatch clock;
  for (int i = 0; i < kCalls; ++i)
    recorder.finish(recorder.start({"allreduce", static_cast<size_t>(i), comm::DataType::kF32, channel}));
  return clock.seconds() / kCalls * 1e9;
}

// Collectives this rank has issued so far (all communicators the watchdog watches).
uint64_t collectives_issued(train::TrainContext& ctx) {
  comm::CollectiveWatchdog* watchdog = ctx.strategy.runtime().watchdog();
  return watchdog ? watchdog->recorder().recorded() : 0;
}

// User and system CPU seconds of this process so far (every thread): what a step costs
// when the host is shared, which stretches wall time but not the cycles a step needs.
double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// This process's CPU seconds (every thread) on its nanosecond clock: fine enough to split
// a millisecond step into phases.
double process_cpu_clock() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

long minor_page_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// The gradient reducer's statistics summed over the timed steps. Entry times are kept
// per step and bucket, so one collective at the end finds the peer wait of every bucket
// of every step without perturbing the steps themselves.
struct CommTotals {
  distribute::CommStats sum;
  void add(const distribute::CommStats& step) {
    sum.comm_seconds += step.comm_seconds;
    sum.exposed_seconds += step.exposed_seconds;
    sum.transform_seconds += step.transform_seconds;
    sum.entry_times.insert(sum.entry_times.end(), step.entry_times.begin(), step.entry_times.end());
  }
};

// Times every phase of the steps after the warm-up and prints the table at the end.
class StepTimer final : public train::Callback {
 public:
  StepTimer(int64_t warmup, int64_t steps, int64_t samples_per_step)
      : warmup_(warmup), steps_(steps), samples_per_step_(samples_per_step) {}

  void on_step_begin(train::TrainContext& ctx, int64_t step) override {
    timed_ = step >= warmup_;
    if (step == warmup_) {
      faults_before_ = minor_page_faults();
      cpu_before_ = cpu_seconds();
      collectives_before_ = collectives_issued(ctx);
      copies_before_ = ctx.shard_copies ? ctx.shard_copies->seconds_in_step() : 0.0;
    }
    kernels::synchronize(ctx.strategy.device());
    phase_clock_.reset();
    phase_cpu_ = process_cpu_clock();
  }
  void on_phase_end(train::TrainContext& ctx, train::StepPhase phase) override {
    kernels::synchronize(ctx.strategy.device());
    const double cpu = process_cpu_clock();
    if (timed_) {
      seconds_[static_cast<int>(phase)] += phase_clock_.seconds();
      cpu_seconds_[static_cast<int>(phase)] += cpu - phase_cpu_;
    }
    phase_clock_.reset();
    phase_cpu_ = cpu;
  }
  void on_step_end(train::TrainContext& ctx, const train::StepEnd& end) override {
    if (timed_) {
      step_seconds_ += end.seconds;
      comm_.add(ctx.model.comm_stats());
    }
    last_losses_ = end.losses;  // read once, at the end
    last_index_ = end.step_in_epoch;
  }
  void on_train_end(train::TrainContext& ctx, const train::TrainSummary&) override;
  double samples_per_sec() const { return samples_per_sec_; }  // all replicas; after the run
  double ms_per_step() const { return ms_per_step_; }            // mean over ranks; after the run
  double cpu_ms_per_step() const { return cpu_ms_per_step_; }    // mean over ranks; after the run

 private:
  int64_t warmup_, steps_, samples_per_step_;
  bool timed_ = false;
  // Prints each rank's CPU time per step, its busy part and its all-reduce phase's.
  void print_per_rank(train::TrainContext& ctx) const;

  Stopwatch phase_clock_;
  double phase_cpu_ = 0.0;  // process_cpu_clock() when the current phase began
  double seconds_[train::kStepPhases] = {};
  double cpu_seconds_[train::kStepPhases] = {};  // CPU time of every thread in each phase
  double step_seconds_ = 0.0;
  train::StepLosses* last_losses_ = nullptr;
  int64_t last_index_ = 0;
  long faults_before_ = 0;
  double cpu_before_ = 0.0;  // cpu_seconds() when the timed steps began
  uint64_t collectives_before_ = 0;
  double copies_before_ = 0.0;  // ShardCopies::seconds_in_step() when the timed steps began
  CommTotals comm_;
  double samples_per_sec_ = 0.0, ms_per_step_ = 0.0, cpu_ms_per_step_ = 0.0;
};

void StepTimer::on_train_end(train::TrainContext& ctx, const train::TrainSummary&) {
  constexpr int kPhases = train::kStepPhases;
  // Collective, on every rank: the wait for the last rank to start each bucket.
  const double peer_wait = distribute::peer_wait_seconds(comm_.sum, ctx.strategy.communicator());
  // Averages over ranks: one all-reduce of every figure.
  constexpr int kComm = kPhases + 3;  // comm, peer wait, copies, exposed
  constexpr int kShardCopies = kComm + 4;
  constexpr int kCpu = kShardCopies + 1;
  double figures[kCpu + 1];
  for (int p = 0; p < kPhases; ++p) figures[p] = seconds_[p];
  figures[kPhases] = step_seconds_;
  figures[kPhases + 1] = static_cast<double>(minor_page_faults() - faults_before_);
  figures[kPhases + 2] = last_losses_ ? last_losses_->loss(last_index_) : 0.0f;
  figures[kComm] = comm_.sum.comm_seconds;
  figures[kComm + 1] = peer_wait;
  figures[kComm + 2] = comm_.sum.transform_seconds;
  figures[kComm + 3] = comm_.sum.exposed_seconds;
  figures[kShardCopies] = ctx.shard_copies ? ctx.shard_copies->seconds_in_step() - copies_before_ : 0.0;
  figures[kCpu] = cpu_seconds() - cpu_before_;
  ctx.strategy.communicator().allreduce(figures, kCpu + 1, comm::ReduceOp::kMean);
  const double steps = static_cast<double>(steps_);
  const double ms_per_step = figures[kPhases] / steps * 1e3;
  const double samples_per_sec = static_cast<double>(samples_per_step_) * steps / figures[kPhases];
  samples_per_sec_ = samples_per_sec;
  ms_per_step_ = ms_per_step;
  cpu_ms_per_step_ = figures[kCpu] / steps * 1e3;

  std::string header = "  ms/step  samples/s";
  std::string row = str_cat("  ", fixed(ms_per_step, 3), "  ", fixed(samples_per_sec, 1));
  for (int p = 0; p < kPhases; ++p) {
    header += str_cat("  ", train::step_phase_name(static_cast<train::StepPhase>(p)));
    row += str_cat("  ", fixed(figures[p] / steps * 1e3, 3));
  }
  chief_print(header + "  (phases in ms/step, mean over ranks)");
  chief_print(row);
  if (ctx.strategy.num_replicas_in_sync() > 1) {
    // comm = from starting each bucket's all-reduce to seeing it complete, summed over
    // buckets (overlapped buckets add up, so it can exceed the all-reduce phase);
    // peer-wait = the part of it spent waiting for the last rank to start the bucket;
    // in-collective = the rest (transfer, reduction, and the delay until completion was
    // noticed); copies = packing, scaling and unpacking buckets; exposed = the all-reduce
    // phase as the reducer sees it, the wait after backward.
    auto ms = [&](int index) { return fixed(figures[index] / steps * 1e3, 3); };
    chief_print("  comm  peer-wait  in-collective  copies  exposed  (gradient buckets, ms/step, mean over ranks)");
    chief_print(str_cat("  ", ms(kComm), "  ", ms(kComm + 1), "  ",
                        fixed((figures[kComm] - figures[kComm + 1]) / steps * 1e3, 3), "  ", ms(kComm + 2), "  ",
                        ms(kComm + 3)));
  }
  chief_print(str_cat("  page faults/step/rank: ", fixed(figures[kPhases + 1] / steps, 1)));
  // CPU time (user + system, every thread of the process, mean over ranks) is what other
  // work on a shared host inflates least; with one thread per rank it is the step's time on
  // a free core. It includes the time ranks spend polling in collectives (MPI waits by
  // spinning).
  chief_print(str_cat("  CPU time/step/rank: ", fixed(cpu_ms_per_step_, 3), " ms"));
  if (ctx.strategy.num_replicas_in_sync() > 1) print_per_rank(ctx);
  // on_failure = shrink with sharded state: the shard copies' time in the step (packing,
  // starting the exchange, waiting for the one in flight; distribute/shard_copies.h).
  if (ctx.shard_copies)
    chief_print(str_cat("  shard copies: ", fixed(figures[kShardCopies] / steps * 1e3, 3),
                        " ms/step/rank in the step (packing, starting, waiting for the exchange), ",
                        fixed(100.0 * figures[kShardCopies] / figures[kPhases], 2), "% of the step"));
  // The flight recorder (trace.collectives): its cost per collective with the ring on and
  // off, times this rank's collectives per step, against the step.
  if (ctx.strategy.runtime().watchdog()) {
    const double per_step = static_cast<double>(collectives_issued(ctx) - collectives_before_) / steps;
    const double on_ns = recorder_ns_per_collective(2000), off_ns = recorder_ns_per_collective(0);
    chief_print(str_cat("  flight recorder (trace.collectives = ", ctx.config.trace_collectives, "): ",
                        fixed(per_step, 1), " collectives/step/rank; ", fixed(on_ns, 0), " ns each with the ring on, ",
                        fixed(off_ns, 0), " ns off; all of the recording with the ring on is ",
                        fixed(100.0 * per_step * on_ns * 1e-6 / ms_per_step, 4), "% of the step"));
  }
  // The numerics of the run (grad_compression, accumulate_steps change it); not a timing.
  char loss[64];
  std::snprintf(loss, sizeof(loss), "%.9g", figures[kPhases + 2]);
  chief_print(str_cat("  loss of the last step (mean over ranks): ", loss));
  chief_print(str_cat("samples_per_sec=", fixed(samples_per_sec, 1), " ms_per_step=", fixed(ms_per_step, 3)));
}

// Ranks that wait for others poll (MPI spins), so their CPU time counts waiting too; the
// phases other than the all-reduce are work, whatever the host's load, and show how
// unevenly the ranks are loaded (reduction = invariant with virtual replicas that do not
// divide over the ranks). The all-reduce phase holds both the exact sum's conversions and
// the wait for the slowest rank.
void StepTimer::print_per_rank(train::TrainContext& ctx) const {
  comm::Communicator& comm = ctx.strategy.communicator();
  const int ranks = comm.size(), rank = comm.rank();
  constexpr int kFigures = 3;  // busy CPU, all-reduce phase CPU, all-reduce phase wall
  std::vector<double> figures(static_cast<size_t>(kFigures * ranks), 0.0);
  const int allreduce = static_cast<int>(train::StepPhase::kAllreduce);
  for (int p = 0; p < train::kStepPhases; ++p)
    if (p != allreduce) figures[static_cast<size_t>(kFigures * rank)] += cpu_seconds_[p];
  figures[static_cast<size_t>(kFigures * rank + 1)] = cpu_seconds_[allreduce];
  figures[static_cast<size_t>(kFigures * rank + 2)] = seconds_[allreduce];
  comm.allreduce(figures.data(), figures.size(), comm::ReduceOp::kSum);  // each rank fills its own
  const double steps = static_cast<double>(steps_);
  chief_print("  rank  busy CPU  all-reduce CPU  all-reduce wall  (ms/step; busy = every phase but the all-reduce)");
  for (int r = 0; r < ranks; ++r) {
    const double* f = figures.data() + static_cast<size_t>(kFigures * r);
    chief_print(str_cat("  ", r, "  ", fixed(f[0] / steps * 1e3, 3), "  ", fixed(f[1] / steps * 1e3, 3), "  ",
                        fixed(f[2] / steps * 1e3, 3)));
  }
}

// Every rank: the 1-replica baseline (bench_scaling.h) and the efficiency of this run
// against it. The ranks other than 0 wait in a polled all-reduce that sleeps between
// tests, so the baseline has the host's cores to itself.
void report_scaling(runtime::Runtime& runtime, const Args& train_args, int64_t steps, int64_t warmup,
                    double samples_per_sec) {
  const int replicas = runtime.world_size();
  double baseline = samples_per_sec;
  std::string output;
  if (replicas > 1) {
    if (runtime.rank() == 0) {
      // The child inherits this thread's mask: give it back every CPU the job started with.
      if (!runtime.core_binding().cpus.empty()) bind_process_to_cpus(runtime.core_binding().found);
      BaselineRun run = run_one_replica_baseline(train_args, steps, warmup);
      baseline = run.samples_per_sec;
      output = std::move(run.output);
    } else {
      baseline = 0.0;
    }
    auto work = runtime.world().allreduce_async(&baseline, 1, comm::DataType::kF64, comm::ReduceOp::kMax);
    while (!work->test()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!output.empty()) {
    chief_print("scaling: the same configuration at 1 replica (rank 0 alone, --launch local):");
    size_t begin = 0;
    while (begin < output.size()) {
      const size_t end = std::min(output.find('\n', begin), output.size());
      chief_print(str_cat("  | ", output.substr(begin, end - begin)));
      begin = end + 1;
    }
  }
  const double efficiency = samples_per_sec / (baseline * replicas);
  chief_print("  replicas  samples/s  samples/s/replica  efficiency");
  chief_print(str_cat("  1  ", fixed(baseline, 1), "  ", fixed(baseline, 1), "  1.000"));
  if (replicas > 1)
    chief_print(str_cat("  ", replicas, "  ", fixed(samples_per_sec, 1), "  ", fixed(samples_per_sec / replicas, 1),
                        "  ", fixed(efficiency, 3)));
  chief_print(str_cat("scaling_efficiency=", fixed(efficiency, 3), " speedup=", fixed(samples_per_sec / baseline, 3),
                      " replicas=", replicas, " baseline_samples_per_sec=", fixed(baseline, 1)));
}

// The step against its bound: the matrix products' FLOPs of one replica's step at this
// process's 512^3 sgemm rate (at its threads), by wall time and by CPU time. On a CPU only.
// A bf16 step is also set against the bf16 product's rate, the bound its products can reach
// (against sgemm's it reads as a fraction above 1 where bf16 products run natively).
void print_bound(nn::Model& model, int64_t samples_per_replica_step, const StepTimer& timing, Precision precision) {
  const double flops = step_flops(model, samples_per_replica_step);
  const double sgemm = sgemm_gflops(), sgemm_cpu = sgemm_gflops(process_cpu_seconds);
  const double bound_ms = flops / (sgemm * 1e9) * 1e3, bound_cpu_ms = flops / (sgemm_cpu * 1e9) * 1e3;
  chief_print(str_cat("  bound: ", fixed(flops / 1e6, 1), " MFLOP/step/replica (matrix products, forward and backward) ",
                      "at the 512^3 sgemm rate of ", fixed(sgemm, 1), " GFLOP/s = ", fixed(bound_ms, 3), " ms (",
                      fixed(sgemm_cpu, 1), " GFLOP/s of CPU time = ", fixed(bound_cpu_ms, 3), " ms)"));
  chief_print(str_cat("fraction_of_bound=", fixed(bound_ms / timing.ms_per_step(), 3),
                      " fraction_of_bound_cpu=", fixed(bound_cpu_ms / timing.cpu_ms_per_step(), 3)));
  if (precision != Precision::kBF16) return;
  const double bf16 = bf16_gemm_gflops(), bf16_cpu = bf16_gemm_gflops(process_cpu_seconds);
  const double bf16_ms = flops / (bf16 * 1e9) * 1e3, bf16_cpu_ms = flops / (bf16_cpu * 1e9) * 1e3;
  chief_print(str_cat("  bf16 bound: the same FLOPs at the 512^3 bf16 product rate of ", fixed(bf16, 1),
                      " GFLOP/s (", kernels::cpu_bf16_method(), ") = ", fixed(bf16_ms, 3), " ms (", fixed(bf16_cpu, 1),
                      " GFLOP/s of CPU time = ", fixed(bf16_cpu_ms, 3), " ms)"));
  chief_print(str_cat("fraction_of_bf16_bound=", fixed(bf16_ms / timing.ms_per_step(), 3),
                      " fraction_of_bf16_bound_cpu=", fixed(bf16_cpu_ms / timing.cpu_ms_per_step(), 3)));
}

// Builds a Trainer for `config`, times its steps and prints the tables.
RunFigures time_training(runtime::Runtime& runtime, const config::TrainConfig& config, const BenchOptions& bench,
                         const Args& train_args, int64_t warmup);

}  // namespace

int bench_train(int& argc, char**& argv, const Args& args) {
  BenchOptions bench;
  bool help = false;
  const Args train_args = take_step_counts(args, bench.counts,
                                          {{"--scaling", &bench.scaling}, {"--compare-reduction", &bench.compare_reduction}});
  const config::TrainConfig config = config::parse_train_config(train_args, &help);
  if (help) {
    std::puts("usage: mirrored bench train --config FILE [--steps N (50)] [--warmup N (5)] [--scaling]\n"
              "                             [--compare-reduction] [--KEY VALUE ...]\n"
              "Times N training steps after the warm-up (step 0 is always a warm-up step).\n"
              "--scaling: then times the same configuration at 1 replica (rank 0 alone, all of\n"
              "the host's cores) and prints samples/s per replica relative to it.\n"
              "--compare-reduction: times reduction = fast, then invariant, and prints step\n"
              "time and all-reduce bytes side by side.\n"
              "Every training key applies (mirrored train --help); the run writes no files\n"
              "(except --timeline) and neither resumes nor evaluates.");
    return 0;
  }
  runtime::Runtime runtime(argc, argv, config::library_options(config).runtime);
  if (!runtime.core_binding().summary.empty()) chief_info(runtime.core_binding().summary);
  const int64_t warmup = std::max<int64_t>(bench.counts.warmup, 1);  // step 0 pays one-time costs
  if (!bench.compare_reduction) {
    time_training(runtime, config, bench, train_args, warmup);
    return 0;
  }
  // The same configuration in both modes, one after the other in this process.
  RunFigures figures[2];
  const distribute::Reduction modes[2] = {distribute::Reduction::kFast, distribute::Reduction::kInvariant};
  for (int i = 0; i < 2; ++i) {
    config::TrainConfig run = config;
    run.reduction = modes[i];
    chief_print(str_cat("--- reduction = ", distribute::reduction_name(modes[i])));
    figures[i] = time_training(runtime, run, bench, train_args, warmup);
  }
  chief_print("  reduction  ms/step  all-reduce bytes/step/rank");
  for (int i = 0; i < 2; ++i)
    chief_print(str_cat("  ", distribute::reduction_name(modes[i]), "  ", fixed(figures[i].step_ms, 2), "  ",
                        figures[i].allreduce_bytes));
  chief_print(str_cat("invariant_vs_fast step_time=", fixed(figures[1].step_ms / figures[0].step_ms, 3),
                      " bytes=", fixed(static_cast<double>(figures[1].allreduce_bytes) /
                                           static_cast<double>(std::max<int64_t>(figures[0].allreduce_bytes, 1)), 3)));
  return 0;
}

namespace {
RunFigures time_training(runtime::Runtime& runtime, const config::TrainConfig& config, const BenchOptions& bench,
                         const Args& train_args, int64_t warmup) {
  train::Trainer trainer(config, runtime, {.write_files = false, .evaluate = false, .steps = warmup + bench.counts.steps});
  auto& strategy = trainer.strategy();
  const int64_t samples_per_step = config.batch_size * config.accumulate_steps;
  auto timer = std::make_unique<StepTimer>(warmup, bench.counts.steps, samples_per_step);
  const StepTimer& timing = *timer;
  trainer.add_callback(std::move(timer));

  chief_print(str_cat("mirrored bench train: model ", config::option_value(config, "model"), ", ",
                      strategy.num_replicas_in_sync(), " replica(s) x ", strategy.per_replica_batch(config.batch_size),
                      " = global batch ", config.batch_size, ", ", kernels::cpu_threads(), " thread(s)/rank, ",
                      bench.counts.steps, " timed steps after ", warmup, " warm-up, precision ",
                      config::option_value(config, "precision")));
  chief_print(str_cat("  ", trainer.model().reducer().buckets().size(), " gradient bucket(s), overlap ",
                      config::option_value(config, "overlap"), ", compression ",
                      config::option_value(config, "grad_compression"), ", allreduce ",
                      strategy.allreduce() == runtime::Allreduce::kHierarchical ? "hierarchical" : "flat",
                      ", accumulate ", config.accumulate_steps));
  trainer.fit();
  if (strategy.device().is_cpu())
    print_bound(trainer.model().module(), strategy.per_replica_batch(config.batch_size) * config.accumulate_steps,
                timing, config.precision);
  if (bench.scaling) report_scaling(runtime, train_args, bench.counts.steps, warmup, timing.samples_per_sec());
  RunFigures figures;
  figures.step_ms = 1e3 * static_cast<double>(samples_per_step) / std::max(timing.samples_per_sec(), 1e-9);
  const nn::ParameterArena& arena = trainer.model().parameters();
  figures.allreduce_bytes = runtime.world_size() == 1 ? 0
                            : config.reduction == distribute::Reduction::kInvariant
                                ? arena.numel() * 8 + static_cast<int64_t>(arena.size()) * 4
                                : arena.numel() * 4;
  return figures;
}
}  // namespace

}  // namespace mirrored::cli
