// mirrored bench train --config FILE [--steps N] [--warmup N] [--KEY VALUE ...]
//
// Runs the training step of `mirrored train` (same config, model, optimizer and data
// pipeline) for warm-up + N steps and reports the timed steps: ms/step, samples/s over
// all replicas, and where a step's time goes. Each phase is timed on every rank and
// averaged over ranks; "all-reduce" is the wait in synchronize_gradients(), so it also
// holds any time a rank spends waiting for a slower one. No evaluation, no files.
#include <sys/resource.h>

#include <cstdio>

#include "commands.h"
#include "mirrored/core/log.h"
#include "mirrored/core/timer.h"
#include "mirrored/distribute/strategy.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/loss.h"
#include "mirrored/train/model_factory.h"
#include "mirrored/train/optimizer_factory.h"
#include "mirrored/train/run_setup.h"

namespace mirrored::cli {
namespace {

enum Phase { kData, kForward, kBackward, kAllreduce, kOptimizer, kPhases };
constexpr const char* kPhaseNames[kPhases] = {"data", "forward", "backward", "all-reduce", "optimizer"};

struct BenchOptions {
  int64_t steps = 50;
  int64_t warmup = 5;
};

// Takes --steps and --warmup out of `args`; the rest is a training configuration.
Args take_bench_options(const Args& args, BenchOptions& options) {
  Args rest;
  for (size_t i = 0; i < args.size(); ++i) {
    const bool steps = args[i] == "--steps", warmup = args[i] == "--warmup";
    if (!steps && !warmup) {
      rest.push_back(args[i]);
      continue;
    }
    if (i + 1 >= args.size()) throw InputError(str_cat("command line: ", args[i], " needs a value"), ExitCode::kUsage);
    const std::string& text = args[++i];
    char* end = nullptr;
    const long long value = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || value < (steps ? 1 : 0))
      throw InputError(
          str_cat("command line: ", args[i - 1], " = '", text, "': expected an integer >= ", steps ? 1 : 0),
          ExitCode::kUsage);
    (steps ? options.steps : options.warmup) = value;
  }
  return rest;
}

long minor_page_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

std::string fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", digits, value);
  return text;
}

}  // namespace

int bench_train(int& argc, char**& argv, const Args& args) {
  BenchOptions bench;
  bool help = false;
  const train::TrainConfig config = train::parse_train_config(take_bench_options(args, bench), &help);
  if (help) {
    std::puts("usage: mirrored bench train --config FILE [--steps N (50)] [--warmup N (5)] [--KEY VALUE ...]\n"
              "Times N training steps after the warm-up (step 0 is always a warm-up step).\n"
              "Every training key applies (mirrored train --help).");
    return 0;
  }
  distribute::Runtime runtime(argc, argv, runtime_options(config));
  distribute::MirroredStrategy strategy(runtime);
  strategy.per_replica_batch(config.batch_size);
  kernels::set_cpu_threads(train::threads_per_rank(config, runtime.cluster()));
  const auto train_set = train::load_dataset(config.train_data);
  auto data = strategy.distribute_dataset(train_set, train::training_data_options(config, train_set->sample_shape));
  auto model = strategy.scope(
      [&] { return train::make_model(config, train_set->sample_shape, train_set->num_classes); },
      {train_set->sample_shape, config.seed});
  auto optimizer = train::make_optimizer(config, model.parameters());
  nn::CrossEntropyLoss loss_fn;

  const int64_t warmup = std::max<int64_t>(bench.warmup, 1);  // step 0 pays one-time costs
  const int64_t total = warmup + bench.steps;
  double seconds[kPhases] = {};
  double step_seconds = 0.0;
  long faults_before = 0;
  int64_t step = 0;
  for (int64_t epoch = 0; step < total; ++epoch) {
    auto range = data.epoch(epoch);
    for (auto it = range.begin(); it != range.end() && step < total; ++it, ++step) {
      if (step == warmup) faults_before = minor_page_faults();
      double t[kPhases];
      Stopwatch clock, phase;
      const distribute::Batch& batch = *it;  // assembles the batch
      t[kData] = phase.seconds();
      phase.reset();
      model.set_step(step);
      model.zero_grad();
      const Tensor& logits = model.forward(batch.images, nn::Mode::kTrain);
      loss_fn.forward(logits, batch.labels);
      t[kForward] = phase.seconds();
      phase.reset();
      model.backward(loss_fn.grad());
      t[kBackward] = phase.seconds();
      phase.reset();
      model.synchronize_gradients();
      t[kAllreduce] = phase.seconds();
      phase.reset();
      optimizer->step();
      t[kOptimizer] = phase.seconds();
      const double step_time = clock.seconds();
      if (step >= warmup) {
        for (int p = 0; p < kPhases; ++p) seconds[p] += t[p];
        step_seconds += step_time;
      }
    }
  }
  const double faults = static_cast<double>(minor_page_faults() - faults_before);

  // Averages over ranks: one all-reduce of every figure.
  double figures[kPhases + 2];
  for (int p = 0; p < kPhases; ++p) figures[p] = seconds[p];
  figures[kPhases] = step_seconds;
  figures[kPhases + 1] = faults;
  strategy.communicator().allreduce(figures, kPhases + 2, comm::ReduceOp::kMean);
  const double steps = static_cast<double>(bench.steps);
  const double ms_per_step = figures[kPhases] / steps * 1e3;
  const double samples_per_sec = static_cast<double>(config.batch_size) * steps / figures[kPhases];

  chief_print(str_cat("mirrored bench train: model ", config.model, ", ", strategy.num_replicas_in_sync(),
                      " replica(s) x ", strategy.per_replica_batch(config.batch_size), " = global batch ",
                      config.batch_size, ", ", kernels::cpu_threads(), " thread(s)/rank, ", bench.steps,
                      " timed steps after ", warmup, " warm-up"));
  std::string header = "  ms/step  samples/s";
  std::string row = str_cat("  ", fixed(ms_per_step, 3), "  ", fixed(samples_per_sec, 1));
  for (int p = 0; p < kPhases; ++p) {
    header += str_cat("  ", kPhaseNames[p]);
    row += str_cat("  ", fixed(figures[p] / steps * 1e3, 3));
  }
  chief_print(header + "  (phases in ms/step, mean over ranks)");
  chief_print(row);
  chief_print(str_cat("  page faults/step/rank: ", fixed(figures[kPhases + 1] / steps, 1)));
  chief_print(str_cat("samples_per_sec=", fixed(samples_per_sec, 1), " ms_per_step=", fixed(ms_per_step, 3)));
  return 0;
}

}  // namespace mirrored::cli
