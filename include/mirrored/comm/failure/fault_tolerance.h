#pragma once
// Surviving a lost rank with ULFM (MPI's fault-tolerance interface: revoke, shrink, agree;
// Open MPI 5's `ftmpi` extension, declared by mpi-ext.h). Two things must hold: ULFM is
// compiled into this binary, and the launcher switched it on for this job (`mpirun --with-ft
// ulfm`, which hands the ranks the MCA parameter mpi_ft_enable). Without the launcher's
// switch Open MPI 5 still aborts the job on a failure, so on_failure = shrink needs both.
//
// Detection: MIRRORED_MPI_CHECK raises PeerFailure (not a plain Error) for ULFM's error
// classes, and the rank that sees one first revokes every communicator the job uses, so
// its peers, blocked in any of them, get an error too instead of waiting forever.
#include <mpi.h>

#include <cstdint>

#include <string>
#include <utility>

#include "mirrored/core/error.h"

namespace mirrored::comm {

struct FaultTolerance {
  bool built = false;    // the MPI headers this binary was compiled against declare ULFM
  bool enabled = false;  // the launcher switched fault tolerance on for this job
  std::string mpi_headers;  // the MPI this binary was compiled against, e.g. "Open MPI 5.0.11"

  // One line for `mirrored info`.
  std::string describe() const;
  // Empty when shrinking can work in this job; otherwise what is missing and how to get it.
  std::string missing() const;
};

// What this binary and this job's launcher provide; needs no MPI_Init.
FaultTolerance fault_tolerance();

// Before MPI_Init, for on_failure = shrink: switches on Open MPI's heartbeat failure
// detector (mpi_ft_detector), so a rank that stops answering (SIGSTOP, a hang, a node that
// crashed or dropped off the network, whose sockets never close) is declared failed like a
// dead one; values the user set in the environment (OMPI_MCA_mpi_ft_detector*) are kept.
// Without it only ended processes count.
//
// The detector is a ring: each rank watches the one before it, and after declaring it
// failed starts watching the one before that. The ranks of a lost node sit side by side
// in the ring (mpirun fills a node before the next), so they are declared one after another:
// each gets detection_seconds(collective_timeout_s, ranks on this node) = timeout / (2 x
// ranks per node), so a whole node is declared within half the collective timeout, as one
// rank was before; but at least 2 s: heartbeats ride on MPI's progress, and with 1 s four
// ranks on two busy cores were declared failed while alive. The heartbeat period is a
// quarter of that (Open MPI wants the timeout above 3 periods).
double detection_seconds(double collective_timeout_s, int ranks_per_node);
void enable_failure_detector(double detection_seconds);

// Before MPI_Init, for on_failure = shrink: SIGPIPE is ignored. A write to a TCP connection
// whose far end died raises it, and its default action ends the writer without a word: a
// survivor would die of its peer's death (seen on 2 hosts x 2 ranks when one host's ranks
// were killed: the leader sending the inter-node all-reduce, or the rank sending heartbeats
// to the lost host, vanished, and the shrink lost 3 ranks instead of 2). Ignored, the write
// fails with EPIPE, which Open MPI's TCP transport reports as the peer's failure. A rank
// whose launcher is gone still ends: the watchdog checks its parent (comm/health/watchdog.h).
void ignore_broken_pipes();

// Before MPI_Init, for on_failure = shrink: MPI_Finalize skips its closing PMIx fence
// (Open MPI's async_mpi_finalize; a value the user set, OMPI_MCA_async_mpi_finalize, is
// kept). That fence spans every process the launcher started, lost ones included: when a
// host's ranks are all lost but its launcher daemon (prted) lives on, the daemon never
// contributes and the survivors' MPI_Finalize waits until it is killed. With fault
// tolerance on, MPI_Finalize already shrinks the world and runs a synchronous barrier over
// the survivors first, which flushes their traffic as the fence would.
void skip_finalize_fence();

// Before MPI_Init, for on_failure = shrink: Open MPI's HAN collectives (its default for a
// communicator that spans hosts) run their "simple" variants of all-reduce, broadcast,
// reduce and all-gather (OMPI_MCA_coll_han_use_simple_<collective> = true; a value the
// user set is kept). HAN's default variants pipeline segments as nonblocking tasks within
// and between nodes and do not pass on a task's error: when a peer failed during one, the
// tasks it fed were dropped ("NBC_Progress: an error 75 was found during schedule ...
// aborting the schedule") and MPI_Allreduce still returned MPI_SUCCESS, each survivor
// holding a different partial sum (seen on 2 hosts x 2 ranks with one rank killed: every
// survivor completed the interrupted step with a wrong gradient, so the shrunk run lost
// the uninterrupted one's bits). The simple variants chain blocking collectives, which
// return the failure, so the interrupted step is redone. HAN itself stays: leaving it out
// (OMPI_MCA_coll = ^han) kept the bits, but then survivors of a whole lost node learnt of
// the loss too late to outlive Open MPI's runtime (comm/failure/runtime_loss.h;
// it.shrink_host, it.spares_host). On one host HAN is not chosen.
void keep_collectives_fault_aware();

// Ends a lost rank's process if it is still there (stopped, hung): `pid` on this host, and
// only when that process belongs to this job as rank `rank` of the world it started in
// (its PMIx namespace and rank), so nothing else is ever signalled. mpirun waits for every
// process it started, so a stopped one would keep the job from ending. True when signalled.
bool end_lost_process(int64_t pid, int rank);

// A peer of one of this rank's communicators failed, or a peer revoked the communicator
// after seeing a failure. Exit code 5 when nothing recovers from it (on_failure = abort).
class PeerFailure : public Error {
 public:
  // `message`: where and what, for the logs; `reason`: what a user is told (the MPI error's
  // own words, "MPI_ERR_PROC_FAILED: Process Failure"), the message when empty.
  explicit PeerFailure(const std::string& message, std::string reason = "")
      : Error(ExitCode::kCommTimeout, message), reason_(std::move(reason)) {}
  const char* reason() const { return reason_.empty() ? what() : reason_.c_str(); }

 private:
  std::string reason_;
};

// The error MIRRORED_MPI_CHECK raises for a failed call: PeerFailure for ULFM's failure
// classes, or for any error while fault tolerance is on and a tracked communicator knows a
// failed process or is revoked (Open MPI 5.0's nonblocking collectives report a peer's
// failure as MPI_ERR_OTHER), after revoking every tracked communicator; Error(kFailure)
// otherwise.
[[noreturn]] void throw_mpi_error(int status, const std::string& where_and_call);

// The communicators to revoke when a failure is seen: each communicator of the job
// registers its MPI handles while they exist. No-ops unless fault tolerance is enabled.
void track_communicator(MPI_Comm comm);
void untrack_communicator(MPI_Comm comm);
void revoke_tracked_communicators();
// How many times this process has revoked them: a failure seen anywhere in the job. Code
// that waits outside MPI (an NCCL collective's poll) compares it with the count it started
// from, to give up on peers that will not come.
uint64_t revocations();
// For a thread that polls MPI on its own (the watchdog): a failure class in `status` (a
// peer failed, or revoked a communicator) revokes every tracked one, so the news reaches
// the whole process, and is true; anything else is false.
bool note_failure(int status);
// Whether `status` is a failure class (a peer failed, or a communicator was revoked) while
// fault tolerance is on; no side effect (for teardown that expects such errors).
bool is_peer_failure(int status);

// Collective over the survivors of `comm` (which may hold failed ranks and be revoked): a
// new communicator of the live ranks in their old order (MPIX_Comm_shrink), after they
// agreed that each of them has it (MPIX_Comm_agree). Errors return as codes on it.
MPI_Comm shrink_communicator(MPI_Comm comm);

}  // namespace mirrored::comm
