#pragma once
// The subcommands of the `mirrored` program. Each receives the words after its name and
// returns the process exit status; errors are thrown and reported by main.
#include <string>
#include <vector>

namespace mirrored::cli {

using Args = std::vector<std::string>;

int train_command(int& argc, char**& argv, const Args& args);
int data_command(const Args& args);
int info_command(int& argc, char**& argv, const Args& args);
int bench_command(int& argc, char**& argv, const Args& args);
int bench_allreduce(int& argc, char**& argv, const Args& args);
int eval_command(int& argc, char**& argv, const Args& args);
int data_inspect_command(const Args& args);   // the words after `mirrored data inspect`
int import_images_command(const Args& args);  // the words after `mirrored data import-images`
int bench_train(int& argc, char**& argv, const Args& args);
int generate_command(const Args& args);  // one process, CPU
int export_command(const Args& args);    // one process, CPU
int bench_layers(int& argc, char**& argv, const Args& args);
int bench_checkpoint(int& argc, char**& argv, const Args& args);
int trace_command(const Args& args);  // one process: reads a run's flight recorder dumps
int ps_command(const Args& args);     // one process: reads a run's ranks.jsonl
int report_command(const Args& args); // one process: a run's records as one HTML page
int resize_command(const Args& args); // one process: asks a shrunk job to grow back
// mirrored rank-agent PROGRAM [ARGS...]: argc/argv are the words after `rank-agent`.
int rank_agent_command(int argc, char** argv);
// mirrored info --ranks RUN_DIR: the straggler scores of a finished run, per rank.
int rank_scores_report(const std::string& run_dir);

}  // namespace mirrored::cli
