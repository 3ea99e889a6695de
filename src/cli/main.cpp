// mirrored: data-parallel training on CPUs and GPUs.
//   mirrored train --config FILE [--KEY VALUE ...]
//   mirrored data import-idx --images F --labels F --out F.h5
//   mirrored eval --checkpoint F --data F
//   mirrored generate --checkpoint F --prompt TEXT --tokens N --temperature T --top_k K --seed S
//   mirrored data inspect F
//   mirrored info
//   mirrored bench allreduce [--min-bytes N --max-bytes N --iters N --warmup N --json FILE]
//   mirrored bench train --config FILE [--steps N] [--warmup N]
#include <cstdio>
#include <exception>
#include <string>
#include <thread>

#include "blas_core.h"
#include "commands.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/core/process.h"
#include "mirrored/distribute/runtime.h"

namespace {

constexpr const char* kUsage =
    "usage: mirrored <command> [options]\n"
    "commands:\n"
    "  train     train a model data-parallel (mirrored train --help)\n"
    "  eval      accuracy and loss of a parameter file (mirrored eval --help)\n"
    "  generate  text sampled from a trained gpt (mirrored generate --help)\n"
    "  data      dataset tools: import-idx, inspect (mirrored data --help)\n"
    "  info      version, build options and, under mpirun, the cluster table\n"
    "  bench     benchmarks: allreduce, train (mirrored bench --help)\n";

// Reports the error once and ends every rank. An error every rank raises identically
// (a bad config) is printed by rank 0 alone; the others give it a moment to get out
// before their abort could tear the job down.
[[noreturn]] void fail(const mirrored::Error& error) {
  using namespace mirrored;
  const bool report_here = !error.uniform() || process_identity().rank == 0;
  if (report_here) rank_error(error.what());
  if (!report_here) std::this_thread::sleep_for(std::chrono::seconds(2));
  distribute::Runtime::abort_job(error.code());
}

}  // namespace

int main(int argc, char** argv) {
  using namespace mirrored;
  cli::use_best_blas_core(argv);
  try {
    distribute::Runtime::identify_from_launcher();
    if (argc < 2) {
      std::fputs(kUsage, stderr);
      return static_cast<int>(ExitCode::kUsage);
    }
    const std::string command = argv[1];
    const cli::Args args(argv + 2, argv + argc);
    if (command == "train") return cli::train_command(argc, argv, args);
    if (command == "data") return cli::data_command(args);
    if (command == "info") return cli::info_command(argc, argv, args);
    if (command == "bench") return cli::bench_command(argc, argv, args);
    if (command == "eval") return cli::eval_command(argc, argv, args);
    if (command == "generate") return cli::generate_command(args);
    if (command == "--help" || command == "-h" || command == "help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    throw InputError(str_cat("unknown command '", command, "'; valid commands: train, eval, generate, data, info, bench"), ExitCode::kUsage);
  } catch (const Error& error) {
    fail(error);
  } catch (const std::exception& error) {
    fail(Error(ExitCode::kFailure, str_cat("unexpected error: ", error.what())));
  }
}
