#include <cstdio>
#include <map>

#include "commands.h"
#include "mirrored/core/error.h"

namespace mirrored::cli {

int bench_command(int& argc, char**& argv, const Args& args) {
  using Bench = int (*)(int&, char**&, const Args&);
  static const std::map<std::string, Bench> benches = {
      {"allreduce", &bench_allreduce},
  };
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::puts("usage: mirrored bench <allreduce> [options]   (mirrored bench NAME --help)");
    return args.empty() ? static_cast<int>(ExitCode::kUsage) : 0;
  }
  const auto it = benches.find(args[0]);
  if (it == benches.end()) {
    std::vector<std::string> names;
    for (const auto& [name, bench] : benches) names.push_back(name);
    throw InputError(str_cat("unknown benchmark '", args[0], "'; valid: ", join(names, ", ")), ExitCode::kUsage);
  }
  return it->second(argc, argv, Args(args.begin() + 1, args.end()));
}

}  // namespace mirrored::cli
