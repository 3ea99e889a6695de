#include <boost/program_options.hpp>

#include <cstdio>
#include <iostream>

#include "commands.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/data/idx.h"

namespace mirrored::cli {
namespace po = boost::program_options;

int data_command(const Args& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::puts("usage: mirrored data import-idx --images FILE --labels FILE --out FILE.h5\n"
              "       mirrored data inspect FILE.h5");
    return args.empty() ? static_cast<int>(ExitCode::kUsage) : 0;
  }
  if (args[0] == "inspect") return data_inspect_command(Args(args.begin() + 1, args.end()));
  if (args[0] != "import-idx")
    throw InputError(str_cat("unknown data command '", args[0], "'; valid: import-idx, inspect"), ExitCode::kUsage);

  po::options_description desc("mirrored data import-idx options");
  desc.add_options()("help,h", "print this help")(
      "images", po::value<std::string>()->required(), "IDX images file, gzip'd or plain ([N, H, W] uint8)")(
      "labels", po::value<std::string>()->required(), "IDX labels file, gzip'd or plain ([N] uint8)")(
      "out", po::value<std::string>()->required(), "HDF5 file to write (/images, /labels)");
  po::variables_map values;
  try {
    po::store(po::command_line_parser(Args(args.begin() + 1, args.end())).options(desc).run(), values);
    if (values.count("help")) {
      std::cout << desc << "\n";
      return 0;
    }
    po::notify(values);
  } catch (const po::error& e) {
    throw InputError(str_cat("data import-idx: ", e.what()), ExitCode::kUsage);
  }
  const auto out = values["out"].as<std::string>();
  const int64_t count = data::import_idx(values["images"].as<std::string>(), values["labels"].as<std::string>(), out);
  chief_print(str_cat("wrote ", count, " samples to ", out));
  return 0;
}

}  // namespace mirrored::cli
