#pragma once
// Collective timeouts for MPI jobs. A blocking collective that a stopped or dead peer never
// joins would hang every other rank forever; the watchdog aborts the whole job instead,
// naming the operation and the ranks that did not arrive. It warns first (Horovod's stall
// inspector): once a collective has waited half the timeout, the chief prints which ranks
// it waits for, on which hosts, and what each was last seen doing; at the timeout every
// rank exits 5 through comm::abort_job.
//
// How it knows who is missing: every rank's watchdog thread sends a small heartbeat (its
// count of completed collectives, and whether it is inside one) to rank 0 twice a second
// on a private communicator, and rank 0 answers each round so the others can tell whether
// it is alive. A rank that is stopped (SIGSTOP), hung in compute or dead sends nothing;
// one that is alive but behind reports a smaller count. Only the watchdog threads talk on
// that communicator, and only with nonblocking calls, so they keep working while the
// rank's other threads are blocked inside a collective.
//
// Verdicts: each heartbeat also carries the collective in flight (communicator, sequence
// number, fingerprint), so a rank running a different collective from its peers at the
// same sequence number is named in the timeout message. The watchdog owns the job's
// flight recorder (flight_recorder.h) and has every reachable rank dump it on a timeout,
// a fatal error (comm::abort_job) or a dump request (SIGUSR2, request_trace_dump()).
//
// With on_failure = shrink (OnTimeout::kRevoke) a timeout does not end the job: the watchdog
// revokes the job's communicators (comm/failure/fault_tolerance.h), which turns the stalled collective
// into a PeerFailure and the survivors' recovery, whose shrink waits until MPI's failure
// detector has declared the silent ranks failed. Only if that recovery has not replaced this
// watchdog within another timeout (a rank alive but hung, which the detector still hears)
// does it abort the job.
#include <mpi.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "mirrored/comm/health/flight_recorder.h"
#include "mirrored/core/error.h"

namespace mirrored::comm {

class CollectiveWatchdog {
 public:
  enum class OnTimeout { kAbort, kRevoke };
  // Collective over `world`. timeout_seconds <= 0 disables timeouts (no thread runs).
  CollectiveWatchdog(MPI_Comm world, double timeout_seconds, size_t trace_collectives = 2000,
                     OnTimeout on_timeout = OnTimeout::kAbort);
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  // Host of every rank (the cluster table), so messages say where a missing rank runs.
  // Until it is set, ranks are named by number only.
  void set_hosts(std::vector<std::string> hosts);

  // A communicator's channel: its collectives are numbered on it (names it in verdicts).
  int add_channel(const char* name) { return recorder_.add_channel(name); }
  FlightRecorder& recorder() { return recorder_; }
  // Where dumps go (<out>/trace); until it is set, nothing is dumped.
  void set_trace_directory(const std::string& directory);
  // The last training step completed here, for dumps and heartbeats (-1: none yet).
  void set_step(int64_t step) { step_ = step; }
  // The process id of the launcher daemon that started this rank (Open MPI's prted or
  // mpirun, this process's parent). Once this process has another parent, that daemon is
  // gone: the runtime ended the job, or its node's daemon died. The rank then has no one
  // to finish with and nothing would end it (an orphan keeps running): it exits at once,
  // status 5, reporting no exit status of its own (the launch scripts then say 9). 0: none.
  void set_launcher_daemon(int64_t pid) { launcher_daemon_ = pid; }
  // Writes this rank's ring to the trace directory now (reason: "timeout", "signal",
  // "error", "peer"). False when no directory is set or the file cannot be written.
  bool dump_trace(const char* reason);

  // Marks one blocking collective as in flight for its lifetime. Several threads may
  // each hold one (the main thread and the communication thread).
  class Scope {
   public:
    Scope(CollectiveWatchdog* watchdog, const CollectiveCall& call);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    CollectiveWatchdog* watchdog_;
    size_t slot_ = 0;
  };

  // Ends the heartbeat thread; collective over the world (call before MPI_Finalize).
  void stop();

 private:
  struct InFlight {
    const char* operation = nullptr;
    size_t count = 0;
    uint64_t sequence = 0;
    std::chrono::steady_clock::time_point since;
    bool active = false;
    CollectiveCall call;
    FlightRecorder::Ticket ticket;
  };
  // What a heartbeat carries: progress, and the sender's oldest collective in flight.
  struct Heartbeat {
    int64_t completed = 0;
    int64_t in_collective = 0;
    int64_t step = -1;
    uint64_t sequence = 0;
    uint64_t fingerprint = 0;
    uint64_t count = 0;
    int32_t type = 0;
    int32_t has_collective = 0;
    char operation[24] = {};
    char communicator[24] = {};
    char site[40] = {};
  };
  struct PeerState {
    int64_t completed = -1;          // collectives the peer had completed when it last spoke
    int32_t in_collective = 0;
    int64_t step = -1;
    bool has_collective = false;
    CollectiveRecord collective;     // its oldest collective in flight, when has_collective
    std::chrono::steady_clock::time_point heard;
  };

  size_t begin(const CollectiveCall& call);
  void end(size_t slot);
  void run();
  void send_heartbeats();
  void receive_heartbeats();
  void complete_pending_sends();
  void check_deadlines();
  void warn(const InFlight& stalled, double waited);
  [[noreturn]] void abort_job(const InFlight& stalled, double waited);
  void revoke(const InFlight& stalled, double waited);
  [[noreturn]] void abort_unrecovered();
  void exit_if_orphaned() const;
  std::string describe_missing(int64_t my_completed, const InFlight* stalled) const;
  Heartbeat my_heartbeat();
  void take_heartbeat(int source, const Heartbeat& beat);
  void on_dump_request(int source);
  // The chief at a timeout, or any rank failing: asks every reachable rank to dump and
  // waits (at most a few seconds) for them, then dumps here. Once per process.
  void dump_everywhere(const char* reason);
  static void dump_before_abort(ExitCode code);
  // comm::end_job_alike's quiesce hook: the heartbeat thread of the watchdog that is still
  // installed (its owner's error left it running) ends, so nothing calls MPI after
  // MPI_Finalize. Local: no barrier, pending heartbeats are left to MPI_Finalize.
  static void stop_thread_for_exit();
  std::string rank_and_host(int rank) const;
  std::string describe_stalled(const InFlight& stalled) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  double timeout_;
  OnTimeout on_timeout_;
  std::chrono::steady_clock::time_point started_;
  bool revoked_ = false;                        // watchdog thread only
  std::chrono::steady_clock::time_point revoked_at_;

  mutable std::mutex mutex_;
  std::vector<InFlight> in_flight_;       // one slot per thread that is in a collective
  std::atomic<int64_t> completed_{0};     // collectives finished by this rank
  std::atomic<uint64_t> issued_{0};
  std::vector<PeerState> peers_;          // rank 0: every rank; others: rank 0 only
  std::vector<MPI_Request> pending_sends_;
  std::vector<Heartbeat> send_buffers_;
  FlightRecorder recorder_;
  std::string trace_directory_;                // guarded by mutex_
  std::atomic<int64_t> step_{-1};
  std::atomic<int> dumps_acknowledged_{0};
  std::atomic<bool> dumped_for_abort_{false};
  std::vector<std::string> hosts_;             // guarded by mutex_
  uint64_t warned_sequence_ = UINT64_MAX;      // the collective already warned about

  std::atomic<int64_t> launcher_daemon_{0};
  std::atomic<bool> stopping_{false};
  std::condition_variable wake_;
  std::thread thread_;
};

}  // namespace mirrored::comm
