#pragma once
// Command-line parsing shared by the subcommands: Boost.Program_options with one error
// form, and the benchmarks' step counts.
#include <boost/program_options.hpp>

#include <cstdint>

#include "commands.h"

namespace mirrored::cli {

// Parses `args` against `desc` (and `positional`, when given) into `values`; false when
// --help was asked for and the help was printed instead. Errors are InputError (usage)
// "COMMAND: what (mirrored COMMAND --help)".
bool parse_options(const Args& args, const boost::program_options::options_description& desc,
                   const boost::program_options::positional_options_description* positional,
                   boost::program_options::variables_map& values, const char* command);

// The benchmarks' --steps N (>= 1) and --warmup N (>= 0), taken out of `args` (the last of
// each wins); `flags` names further value-less flags, each set to true when present. The
// rest of `args` is returned: a training configuration.
struct StepCounts {
  int64_t steps = 0;
  int64_t warmup = 0;
};
Args take_step_counts(const Args& args, StepCounts& counts,
                      const std::vector<std::pair<const char*, bool*>>& flags = {});

}  // namespace mirrored::cli
