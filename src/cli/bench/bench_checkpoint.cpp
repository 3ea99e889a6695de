// mirrored bench checkpoint --config FILE [--steps N (6)] [--warmup N (2)] [--every N (3)] [--KEY VALUE ...]
//
// What a checkpoint costs the training: the same configuration trained warm-up + N steps
// five times in this process, with a fresh Trainer each time: without checkpoints (the
// baseline), then with a checkpoint every `--every` steps written in the step
// (checkpoint.async = false) and in the background (true), then a checkpoint after every
// step (checkpoint.every_steps = 1), both ways. For each it prints, on rank 0:
//   written        the checkpoints written in the timed steps
//   ms/step        the mean wall time from one step's end to the next, checkpoints included
//   vs none        that against the baseline
//   in-step ms     the mean time each checkpoint held its step (gather, host copy and, when
//                  synchronous, the file): the stall the training sees at once
//   extra ms/ckpt  (the run's time - the baseline's for as many steps) / checkpoints, the
//                  last write's drain included: what a checkpoint costs in all, the
//                  background thread's competition for the cores included
//   CPU ms/step    user + system time of every thread (the writer's included) per timed
//                  step, mean over ranks, and that against the baseline: what the
//                  checkpoints cost in cycles, which a shared host's load does not stretch
// The files go to <out>/bench-checkpoints (the file system the run's checkpoints would
// use), one kept, removed at the end. No evaluation, no other files.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <string>
#include <filesystem>
#include <memory>
#include <vector>

#include "../commands.h"
#include "../parse_options.h"
#include "sgemm_bound.h"
#include "mirrored/checkpoint/checkpoint_writer.h"
#include "mirrored/config/library_options.h"
#include "mirrored/core/log.h"
#include "mirrored/core/strings.h"
#include "mirrored/core/timer.h"
#include "mirrored/distribute/strategy.h"
#include "mirrored/train/checkpointer.h"
#include "mirrored/train/trainer.h"

namespace mirrored::cli {
namespace {

struct Mode {
  const char* name;
  int64_t every = 0;  // 0: no checkpoints
  bool async = false;
};

struct ModeFigures {
  double seconds = 0.0;       // the timed steps, the last write's drain included
  double cpu_seconds = 0.0;   // CPU time of the same, mean over ranks
  double in_step = 0.0;       // summed over checkpoints
  int64_t checkpoints = 0;
};

// Times the steps after the warm-up and checkpoints every `every` of them.
class CheckpointTimer final : public train::Callback {
 public:
  CheckpointTimer(int64_t warmup, int64_t every, ModeFigures& figures)
      : warmup_(warmup), every_(every), figures_(figures) {}

  void on_step_end(train::TrainContext& ctx, const train::StepEnd& end) override {
    if (end.step == warmup_) {
      run_clock_.reset();
      cpu_before_ = process_cpu_seconds();
    }
    if (end.step <= warmup_ || every_ == 0 || (end.step - warmup_) % every_ != 0) return;
    ctx.model.synchronize_buffers();  // as the Checkpointer does at a log point
    Stopwatch clock;
    train::Checkpointer().save(ctx, end.step);
    figures_.in_step += clock.seconds();
    ++figures_.checkpoints;
  }
  void on_train_end(train::TrainContext& ctx, const train::TrainSummary&) override {
    if (ctx.checkpoints) ctx.checkpoints->wait();  // the last write counts
    figures_.cpu_seconds = process_cpu_seconds() - cpu_before_;  // before the barrier's polling
    ctx.strategy.communicator().barrier();
    figures_.seconds = run_clock_.seconds();
    ctx.strategy.communicator().allreduce(&figures_.cpu_seconds, 1, comm::ReduceOp::kMean);
  }

 private:
  int64_t warmup_, every_;
  ModeFigures& figures_;
  Stopwatch run_clock_;
  double cpu_before_ = 0.0;
};

ModeFigures time_mode(runtime::Runtime& runtime, config::TrainConfig config, const Mode& mode, int64_t warmup,
                      int64_t steps) {
  config.checkpoint_async = mode.async;
  checkpoint::CheckpointWriter writer((std::filesystem::path(config.out) / "bench-checkpoints").string(), 1);
  ModeFigures figures;
  train::Trainer trainer(config, runtime,
                         {.write_files = false, .evaluate = false, .steps = warmup + steps, .checkpoints = &writer});
  trainer.add_callback(std::make_unique<CheckpointTimer>(warmup, mode.every, figures));
  trainer.fit();
  return figures;
}

void print_table(const std::vector<Mode>& modes, const std::vector<ModeFigures>& figures, int64_t steps) {
  const double base = figures[0].seconds / static_cast<double>(steps) * 1e3;
  const double base_cpu = figures[0].cpu_seconds / static_cast<double>(steps) * 1e3;
  chief_print("  checkpoints            every  written  ms/step  vs none  in-step ms  extra ms/ckpt  CPU ms/step  vs none");
  for (size_t i = 0; i < modes.size(); ++i) {
    const ModeFigures& f = figures[i];
    const double ms_per_step = f.seconds / static_cast<double>(steps) * 1e3;
    const double per_checkpoint = f.checkpoints > 0 ? 1.0 / static_cast<double>(f.checkpoints) : 0.0;
    chief_print(str_cat("  ", modes[i].name, std::string(std::max<size_t>(1, 23 - std::string(modes[i].name).size()), ' '),
                        modes[i].every, "  ", f.checkpoints, "  ", fixed(ms_per_step, 1), "  ", fixed(ms_per_step / base, 3), "  ",
                        f.checkpoints ? fixed(f.in_step * per_checkpoint * 1e3, 1) : std::string("-"), "  ",
                        f.checkpoints ? fixed((ms_per_step - base) * static_cast<double>(steps) * per_checkpoint, 1)
                                      : std::string("-"),
                        "  ", fixed(f.cpu_seconds / static_cast<double>(steps) * 1e3, 2), "  ",
                        fixed(f.cpu_seconds / static_cast<double>(steps) * 1e3 / base_cpu, 3)));
  }
  auto in_step = [&](size_t i) { return figures[i].in_step / static_cast<double>(std::max<int64_t>(figures[i].checkpoints, 1)); };
  chief_print(str_cat("async_vs_sync in_step_stall=", fixed(in_step(2) / in_step(1), 3),
                      " every_step_cost_sync=", fixed(figures[3].seconds / figures[0].seconds, 3),
                      " every_step_cost_async=", fixed(figures[4].seconds / figures[0].seconds, 3)));
  chief_print(str_cat("every_step_cpu_cost_sync=", fixed(figures[3].cpu_seconds / figures[0].cpu_seconds, 3),
                      " every_step_cpu_cost_async=", fixed(figures[4].cpu_seconds / figures[0].cpu_seconds, 3)));
}

}  // namespace

int bench_checkpoint(int& argc, char**& argv, const Args& args) {
  StepCounts counts{6, 2};
  bool help = false;
  // --every N: taken out before the training keys are parsed.
  int64_t every = 3;
  Args rest;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--every" && i + 1 < args.size()) {
      const std::string& value = args[++i];
      size_t used = 0;
      try {
        every = std::stoll(value, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != value.size() || every < 1)
        throw InputError(str_cat("bench checkpoint: --every expects a whole number of steps >= 1, got '", value, "'"),
                         ExitCode::kUsage);
    } else {
      rest.push_back(args[i]);
    }
  }
  const Args train_args = take_step_counts(rest, counts);
  const config::TrainConfig config = config::parse_train_config(train_args, &help);
  if (help) {
    std::puts("usage: mirrored bench checkpoint --config FILE [--steps N (6)] [--warmup N (2)] [--every N (3)]\n"
              "                                  [--KEY VALUE ...]\n"
              "Trains warm-up + N steps five times: no checkpoints; a checkpoint every N steps\n"
              "written in the step, then in the background; one after every step, both ways.\n"
              "Prints the step time, the stall inside the checkpoint's step and the whole cost of\n"
              "each checkpoint against the run without. Files: <out>/bench-checkpoints (removed).\n"
              "GPT-2 small's shape on a CPU (85 M parameters, 1 GB checkpoints):\n"
              "  --config launch/configs/gpt2_small_cpu.ini --threads 2");
    return 0;
  }
  runtime::Runtime runtime(argc, argv, config::library_options(config).runtime);
  const int64_t warmup = std::max<int64_t>(counts.warmup, 1);
  const std::vector<Mode> modes = {{"none", 0, false},
                                   {"synchronous", every, false},
                                   {"background (async)", every, true},
                                   {"synchronous", 1, false},
                                   {"background (async)", 1, true}};
  chief_print(str_cat("mirrored bench checkpoint: model ", config::option_value(config, "model"), ", ",
                      runtime.world_size(), " rank(s), ", counts.steps, " timed steps after ", warmup,
                      " warm-up, files in ", config.out, "/bench-checkpoints"));
  std::vector<ModeFigures> figures;
  for (const Mode& mode : modes) {
    figures.push_back(time_mode(runtime, config, mode, warmup, counts.steps));
    chief_info(str_cat("  done: ", mode.name, " every ", mode.every));
  }
  print_table(modes, figures, counts.steps);
  if (runtime.rank() == 0) {
    std::error_code error;
    std::filesystem::remove_all(std::filesystem::path(config.out) / "bench-checkpoints", error);
  }
  return 0;
}

}  // namespace mirrored::cli
