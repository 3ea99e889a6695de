#pragma once
// Hot spares' line to the training ranks (RuntimeOptions::spares). Every process of the
// job keeps one receive from any source posted on a communicator of its own over the job
// communicator. ULFM completes such a receive in error on every process as soon as any
// process of the communicator is known to have failed (MPI_ERR_PROC_FAILED_PENDING), or
// the communicator is revoked (a peer saw a failure elsewhere): so a spare, which takes
// part in no collective, still learns of every loss, and the training ranks learn of a
// lost spare, whose communicators they do not share. The chief's message at the end of
// training completes the receive normally: the spares then end.
#include <mpi.h>

#include <cstdint>
#include <vector>

namespace mirrored::runtime {

class JobChannel {
 public:
  // Collective over `job` (MPI_Comm_dup); the channel is revoked with the job's other
  // communicators on a failure (comm::track_communicator).
  explicit JobChannel(MPI_Comm job);
  ~JobChannel();
  JobChannel(const JobChannel&) = delete;
  JobChannel& operator=(const JobChannel&) = delete;

  // Throws comm::PeerFailure (after revoking every tracked communicator) when a process
  // of the job failed or the channel was revoked; true when the end of training was
  // announced.
  bool poll();
  // A spare's wait: poll() every kPollInterval, sleeping in between (Open MPI busy-polls in
  // blocking calls: a blocking receive would take a whole core). Returns when training
  // ended; throws comm::PeerFailure as poll() does. Ends this process (status 5) should
  // the launcher's daemon `launcher_daemon` be gone (mpirun ended the job).
  void wait_for_end(int64_t launcher_daemon);
  // The chief, at the end of training: tells each job rank in `ranks` that the job ends;
  // one that cannot be told (lost) is warned about.
  void announce_end(const std::vector<int>& ranks);

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Request request_ = MPI_REQUEST_NULL;
  int32_t message_ = 0;
};

}  // namespace mirrored::runtime
