// mirrored report RUN_DIR [--out FILE]: one self-contained HTML page of a run (charts of
// loss, throughput and world size with membership events; straggler records; the run's
// configuration), from the records in its run directory (app/run_records.h, app/run_report.h).
// It reads a finished run or one still writing; it needs no MPI.
#include <boost/program_options.hpp>

#include "commands.h"
#include "parse_options.h"
#include "mirrored/app/run_records.h"
#include "mirrored/app/run_report.h"
#include "mirrored/core/error.h"
#include "mirrored/core/file_replacement.h"
#include "mirrored/core/log.h"
#include "mirrored/core/strings.h"

namespace mirrored::cli {

int report_command(const Args& args) {
  namespace po = boost::program_options;
  po::options_description desc(
      "usage: mirrored report RUN_DIR [--out FILE]\n"
      "One self-contained HTML page of a run (no scripts, no network): loss and evaluation curves, tokens/s or\n"
      "samples/s, the world size with membership events, straggler records, the configuration.\noptions");
  desc.add_options()("help,h", "print this help")("run_dir", po::value<std::string>(), "the run directory")(
      "out", po::value<std::string>(), "where to write the page (default RUN_DIR/report.html)");
  po::positional_options_description positional;
  positional.add("run_dir", 1);
  po::variables_map values;
  if (!parse_options(args, desc, &positional, values, "report")) return 0;
  if (!values.count("run_dir"))
    throw InputError("report: a run directory is needed (mirrored report RUN_DIR)", ExitCode::kUsage);
  std::string run_dir = values["run_dir"].as<std::string>();
  while (run_dir.size() > 1 && run_dir.back() == '/') run_dir.pop_back();
  const app::RunRecords records = app::read_run_records(run_dir);
  const std::string out = values.count("out") ? values["out"].as<std::string>() : run_dir + "/report.html";
  FileReplacement page(out);
  page.write(app::run_report_html(records));
  page.commit();
  if (records.unfinished_lines > 0)
    rank_warning(str_cat("report: ", run_dir, "/metrics.jsonl ends in an unfinished line (the run is still writing): "
                         "left out"));
  chief_print(str_cat("report: wrote ", out, " (", records.train.size(), " training log points, ", records.eval.size(),
                      " evaluations, ", records.membership.size(), " membership events, ", records.stragglers.size(),
                      " straggler records)"));
  return 0;
}

}  // namespace mirrored::cli
