#include "mirrored/runtime/launcher.h"

#include <cstdlib>

#include "mirrored/core/error.h"

namespace mirrored::runtime {
namespace {
// -1 when unset or not a non-negative integer (a launcher never writes anything else).
int read_int(const LauncherEnv::Getenv& getenv, const char* name) {
  const char* value = getenv(name);
  if (!value || !*value) return -1;
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  if (*end != '\0' || parsed < 0) return -1;
  return static_cast<int>(parsed);
}

std::string read_string(const LauncherEnv::Getenv& getenv, const char* name) {
  const char* value = getenv(name);
  return value ? std::string(value) : std::string();
}

bool present(const LauncherEnv::Getenv& getenv, const char* name) {
  const char* value = getenv(name);
  return value && *value;
}
}  // namespace

LauncherEnv LauncherEnv::read(const Getenv& getenv) {
  LauncherEnv env;
  env.slurm_job_id = read_string(getenv, "SLURM_JOB_ID");
  env.slurm_step_id = read_string(getenv, "SLURM_STEP_ID");
  env.slurm_nodelist = read_string(getenv, "SLURM_JOB_NODELIST");
  const bool started_by_mpirun = present(getenv, "OMPI_COMM_WORLD_RANK") || present(getenv, "OMPI_COMM_WORLD_SIZE");
  env.slurm_task = !started_by_mpirun && present(getenv, "SLURM_STEP_ID") && present(getenv, "SLURM_PROCID");
  if (started_by_mpirun) {
    env.kind = Kind::kOpenMpi;
    env.mpirun_local_size = read_int(getenv, "OMPI_COMM_WORLD_LOCAL_SIZE");
  } else if (env.slurm_task) {
    env.kind = Kind::kSlurm;
  } else if (present(getenv, "PMIX_RANK")) {
    env.kind = Kind::kPmix;
  } else if (present(getenv, "PMI_RANK") || present(getenv, "PMI_SIZE")) {
    env.kind = Kind::kPmi;
  }
  if (env.slurm_task) {
    env.slurm_procid = read_int(getenv, "SLURM_PROCID");
    env.slurm_localid = read_int(getenv, "SLURM_LOCALID");
    env.slurm_nodeid = read_int(getenv, "SLURM_NODEID");
    env.slurm_step_tasks = read_int(getenv, "SLURM_STEP_NUM_TASKS");
    if (env.slurm_step_tasks < 0) env.slurm_step_tasks = read_int(getenv, "SLURM_NTASKS");
  }
  return env;
}

LauncherEnv LauncherEnv::from_environment() {
  return read([](const char* name) { return static_cast<const char*>(std::getenv(name)); });
}

std::string LauncherEnv::describe() const {
  const std::string nodes = slurm_nodelist.empty() ? "" : str_cat(" on ", slurm_nodelist);
  switch (kind) {
    case Kind::kSlurm:
      return str_cat("srun (Slurm job ", slurm_job_id, " step ", slurm_step_id, ", ", slurm_step_tasks, " tasks",
                     nodes, ")");
    case Kind::kOpenMpi:
      return slurm_job_id.empty() ? "mpirun (Open MPI)"
                                  : str_cat("mpirun (Open MPI) inside Slurm job ", slurm_job_id, nodes);
    case Kind::kPmix: return "PMIx";
    case Kind::kPmi: return "PMI";
    case Kind::kNone: break;
  }
  return slurm_job_id.empty() ? "none (one process)" : str_cat("none (one process) inside Slurm job ", slurm_job_id);
}

}  // namespace mirrored::runtime
