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

}  // namespace mirrored
