// mirrored: data-parallel training on CPUs and GPUs.
//   mirrored train --config FILE [--KEY VALUE ...]
//   mirrored eval --checkpoint F --data F
//   mirrored generate --checkpoint F --prompt TEXT --tokens N --temperature T --top_k K --seed S
//   mirrored export --checkpoint F --out model.safetensors
//   mirrored data import-idx --images F --labels F --out F.h5
//   mirrored data import-images --root DIR --out DIR [--size H,W] [--channels 1|3]
//   mirrored data import-text --out DIR [--tokenizer bytes|sentencepiece|F.model] FILE...
//   mirrored data inspect F
//   mirrored info [--ranks RUN_DIR]
//   mirrored trace RUN_DIR
//   mirrored ps RUN_DIR
//   mirrored report RUN_DIR [--out FILE]
//   mirrored resize RUN_DIR
//   mirrored bench allreduce [--min_bytes N --max_bytes N --iters N --warmup N --json FILE]
//   mirrored bench train --config FILE [--steps N] [--warmup N]
//   mirrored bench layers --config FILE [--steps N] [--warmup N]
//   mirrored --version
//   mirrored rank-agent PROGRAM [ARGS...]   (started by Open MPI's daemon; rank_agent_command.cpp)
#include <cstdio>
#include <exception>
#include <string>

#include "blas_core.h"
#include "commands.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/core/process.h"
#include "mirrored/runtime/runtime.h"

namespace {

constexpr const char* kUsage =
    "usage: mirrored <command> [options]      (mirrored <command> --help for its options)\n"
    "commands:\n"
    "  train                train a model data-parallel\n"
    "  eval                 accuracy and loss of a parameter file\n"
    "  generate             text sampled from a trained gpt\n"
    "  export               a trained gpt as safetensors in GPT-2's layout (PyTorch, transformers)\n"
    "  data import-idx      IDX images and labels (Fashion-MNIST) into HDF5\n"
    "  data import-images   a folder of JPEG/PNG images, one subfolder per class, into HDF5\n"
    "  data import-text     text files or wheels into byte or SentencePiece tokens (HDF5)\n"
    "  data inspect         what an HDF5 data file holds: datasets, shapes, labels or tokens\n"
    "  info                 version, build options, devices and, under mpirun, the cluster table;\n"
    "                       --ranks RUN_DIR: a finished run's straggler scores per rank\n"
    "  trace                the verdict on a stuck job from its flight recorder dumps (RUN_DIR/trace)\n"
    "  ps                   where each rank of a run runs: rank, host, pid, agent pid, state (RUN_DIR/ranks.jsonl)\n"
    "  report               a run as one self-contained HTML page: curves, throughput, world size, stragglers\n"
    "  resize               asks a job that lost ranks to grow back to its configured size (exit 11, relaunched)\n"
    "  bench allreduce      nccl-tests style all-reduce table\n"
    "  bench train          training step time and throughput, by phase\n"
    "  bench layers         per-layer forward/backward time against FLOPs\n"
    "  --version            print the version\n";

// Reports the error once and ends every rank. An error every rank raises identically
// (a bad config, a checkpoint of another model, a malformed data file) is printed by rank 0
// alone, and each rank ends on its own with MPI finalised and the code: the launcher
// reports the code, and no MPI_Abort banner follows the one-line error. An error of one
// rank (the others would wait for it in a collective) aborts the whole job.
[[noreturn]] void fail(const mirrored::Error& error) {
  using namespace mirrored;
  const bool report_here = !error.uniform() || process_identity().rank == 0;
  if (report_here) rank_error(error.what());
  report_exit_status(static_cast<int>(error.code()));
  if (error.uniform()) runtime::Runtime::end_job_alike(error.code(), report_here ? std::string() : error.what());
  runtime::Runtime::abort_job(error.code());
}

}  // namespace

// The command's status; errors end the job in fail().
static int run_command(int argc, char** argv) {
  using namespace mirrored;
  try {
    runtime::Runtime::identify_from_launcher();
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
    if (command == "export") return cli::export_command(args);
    if (command == "trace") return cli::trace_command(args);
    if (command == "ps") return cli::ps_command(args);
    if (command == "report") return cli::report_command(args);
    if (command == "resize") return cli::resize_command(args);
    if (command == "--version" || command == "-V" || command == "version") {
      std::printf("mirrored %s\n", MIRRORED_VERSION);
      return 0;
    }
    if (command == "--help" || command == "-h" || command == "help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    throw InputError(str_cat("unknown command '", command, "'; valid commands: train, eval, generate, export, data, info, trace, ps, report, resize, bench, --version (mirrored --help)"), ExitCode::kUsage);
  } catch (const Error& error) {
    fail(error);
  } catch (const std::exception& error) {
    fail(Error(ExitCode::kFailure, str_cat("unexpected error: ", error.what())));
  }
}

int main(int argc, char** argv) {
  // Before anything else: the agent only starts and minds the rank (no BLAS, no MPI).
  if (argc >= 2 && std::string(argv[1]) == "rank-agent") return mirrored::cli::rank_agent_command(argc - 2, argv + 2);
  mirrored::cli::use_best_blas_core(argv);
  const int status = run_command(argc, argv);
  // After the command's Runtime has finalised MPI: the chief tells the launch script that
  // mirrored itself ended, and how (its run-state directory, MIRRORED_RUN_STATE_DIR; nothing without it).
  mirrored::report_exit_status(status);
  return status;
}
