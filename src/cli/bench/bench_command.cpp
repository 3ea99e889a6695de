// `mirrored bench NAME ...`: one table from benchmark name to its entry point, so a new
// benchmark is one row here plus its own file.
#include <cstdio>
#include <functional>
#include <vector>

#include "../commands.h"
#include "mirrored/core/error.h"

namespace mirrored::cli {
namespace {

struct Benchmark {
  const char* name;
  const char* help;
  std::function<int(int&, char**&, const Args&)> run;
};

const std::vector<Benchmark>& benchmarks() {
  static const std::vector<Benchmark> table = {
      {"allreduce", "nccl-tests style all-reduce table: the project's communicator next to MPI_Allreduce",
       bench_allreduce},
      {"train", "training step time and throughput, split into data/forward/backward/all-reduce/optimizer",
       bench_train},
      {"layers", "per-layer forward/backward time against FLOPs and this machine's sgemm rate", bench_layers},
      {"checkpoint", "the step-time stall of a checkpoint written in the step and in the background, side by side",
       bench_checkpoint},
  };
  return table;
}

std::string usage() {
  std::string text = "usage: mirrored bench <benchmark> [options]\nbenchmarks:\n";
  for (const auto& b : benchmarks()) text += str_cat("  ", b.name, "  ", b.help, "\n");
  return text;
}

}  // namespace

int bench_command(int& argc, char**& argv, const Args& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fputs(usage().c_str(), args.empty() ? stderr : stdout);
    return args.empty() ? static_cast<int>(ExitCode::kUsage) : 0;
  }
  std::vector<std::string> names;
  for (const auto& b : benchmarks()) {
    if (args[0] == b.name) return b.run(argc, argv, Args(args.begin() + 1, args.end()));
    names.emplace_back(b.name);
  }
  throw InputError(str_cat("unknown benchmark '", args[0], "'; valid: ", join(names, ", ")), ExitCode::kUsage);
}

}  // namespace mirrored::cli
