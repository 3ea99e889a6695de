#include "parse_options.h"

#include <cstdlib>
#include <iostream>

#include "mirrored/core/error.h"
#include "mirrored/core/strings.h"

namespace mirrored::cli {
namespace po = boost::program_options;

bool parse_options(const Args& args, const po::options_description& desc,
                   const po::positional_options_description* positional, po::variables_map& values,
                   const char* command) {
  try {
    po::command_line_parser parser(args);
    parser.options(desc);
    // Without a description of its own, none: a stray word is an error, not ignored.
    const po::positional_options_description none;
    parser.positional(positional != nullptr ? *positional : none);
    po::store(parser.run(), values);
    if (values.count("help")) {
      std::cout << desc << "\n";
      return false;
    }
    po::notify(values);
  } catch (const po::error& e) {
    throw InputError(str_cat(command, ": ", e.what(), " (mirrored ", command, " --help)"), ExitCode::kUsage);
  }
  return true;
}

Args take_step_counts(const Args& args, StepCounts& counts, const std::vector<std::pair<const char*, bool*>>& flags) {
  Args rest;
  for (size_t i = 0; i < args.size(); ++i) {
    bool is_flag = false;
    for (const auto& [name, value] : flags)
      if (args[i] == name) is_flag = *value = true;
    if (is_flag) continue;
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
    (steps ? counts.steps : counts.warmup) = value;
  }
  return rest;
}

}  // namespace mirrored::cli
