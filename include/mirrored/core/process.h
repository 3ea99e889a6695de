#pragma once
// Who this process is in the job. Set once by the runtime after MPI start-up; read by
// errors and logging so every message can say which rank on which host produced it.
#include <string>

namespace mirrored {

struct ProcessIdentity {
  int rank = 0;
  int world_size = 1;
  std::string host;
};

const ProcessIdentity& process_identity();
void set_process_identity(ProcessIdentity identity);
std::string local_hostname();

// "rank 1/4 on node07"
std::string describe_process();

// The status this process is about to exit with. When MIRRORED_RUN_STATE_DIR is set (the
// launch scripts set it: launch/local.sh, launch/multinode.sh, slurm/; core/run_state.h),
// the job's chief (rank 0 of the world as it is now, so the lowest survivor after a shrink)
// writes it to the file exit-status there, so a script can tell a job that ended with
// mirrored's own status from one the MPI runtime ended before mirrored finished (mpirun can
// exit 0 then). Other ranks, and every process without the variable, do nothing. Safe to
// call more than once; the last wins. Never throws (it runs on the way out).
void report_exit_status(int status);

}  // namespace mirrored
