#pragma once
// What the launcher told this process through its environment, read before MPI starts.
//
// Slurm's per-task variables (SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID) describe a process
// only when srun started it. Under `mpirun` inside a batch job every rank inherits the
// batch shell's values (SLURM_PROCID=0 on all of them), so they are ignored there: Open
// MPI's own OMPI_COMM_WORLD_* variables mark that case.
#include <functional>
#include <string>

namespace mirrored::runtime {

struct LauncherEnv {
  enum class Kind { kNone, kOpenMpi, kSlurm, kPmix, kPmi };
  Kind kind = Kind::kNone;
  bool slurm_task = false;       // srun started this process: the SLURM_* task values are its own
  int slurm_procid = -1;
  int slurm_localid = -1;
  int slurm_nodeid = -1;
  int slurm_step_tasks = -1;     // SLURM_STEP_NUM_TASKS, else SLURM_NTASKS
  std::string slurm_job_id;      // set inside any Slurm job (also under mpirun)
  std::string slurm_step_id;
  std::string slurm_nodelist;    // SLURM_JOB_NODELIST, compressed as Slurm writes it
  int mpirun_local_size = -1;    // OMPI_COMM_WORLD_LOCAL_SIZE: mpirun's ranks on this node

  // One line for the cluster table, e.g. "srun (Slurm job 12 step 0, 4 tasks on n[1-2])".
  std::string describe() const;

  using Getenv = std::function<const char*(const char*)>;
  static LauncherEnv read(const Getenv& getenv);
  static LauncherEnv from_environment();
};

}  // namespace mirrored::runtime
