#include "bench_scaling.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "mirrored/core/error.h"
#include "mirrored/core/strings.h"

extern char** environ;

namespace mirrored::cli {
namespace {
// Variables through which a launcher tells a process it is one rank of a job (and which
// Cluster reads for local ranks): the child must see none, or it would size its threads
// for the parent job's ranks on the host.
bool launcher_variable(const char* entry) {
  for (const char* prefix : {"OMPI_", "PMIX_", "PMI_", "OPAL_", "SLURM_", "MIRRORED_LOCAL_RANK=", "MIRRORED_LAUNCH="})
    if (std::strncmp(entry, prefix, std::strlen(prefix)) == 0) return true;
  return false;
}
}  // namespace

BaselineRun run_one_replica_baseline(const std::vector<std::string>& train_args, int64_t steps, int64_t warmup) {
  std::vector<std::string> args = {"mirrored", "bench", "train"};
  args.insert(args.end(), train_args.begin(), train_args.end());
  for (const std::string& extra : {std::string("--launch"), std::string("local"), std::string("--steps"),
                                   str_cat(steps), std::string("--warmup"), str_cat(warmup)})
    args.push_back(extra);
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (char** entry = environ; *entry != nullptr; ++entry)
    if (!launcher_variable(*entry)) envp.push_back(*entry);
  envp.push_back(nullptr);

  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) throw Error(ExitCode::kFailure, str_cat("bench train --scaling: pipe: ", std::strerror(errno)));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[1]);
  pid_t child = 0;
  const int spawned = posix_spawn(&child, "/proc/self/exe", &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  if (spawned != 0) {
    close(pipe_fds[0]);
    throw Error(ExitCode::kFailure, str_cat("bench train --scaling: starting the 1-replica run: ", std::strerror(spawned)));
  }
  BaselineRun run;
  char buffer[4096];
  ssize_t got = 0;
  while ((got = read(pipe_fds[0], buffer, sizeof(buffer))) > 0 || (got < 0 && errno == EINTR))
    if (got > 0) run.output.append(buffer, static_cast<size_t>(got));
  close(pipe_fds[0]);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw Error(ExitCode::kFailure, str_cat("bench train --scaling: the 1-replica run failed (status ", status,
                                            "); its output:\n", run.output));
  const std::string key = "samples_per_sec=";
  const size_t at = run.output.rfind(key);
  if (at == std::string::npos)
    throw Error(ExitCode::kFailure, str_cat("bench train --scaling: no '", key, "' in the 1-replica run's output:\n",
                                            run.output));
  run.samples_per_sec = std::strtod(run.output.c_str() + at + key.size(), nullptr);
  return run;
}

}  // namespace mirrored::cli
