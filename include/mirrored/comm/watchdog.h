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

namespace mirrored::comm {

class CollectiveWatchdog {
 public:
  // Collective over `world`. timeout_seconds <= 0 disables timeouts (no thread runs).
  CollectiveWatchdog(MPI_Comm world, double timeout_seconds);
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  double timeout_seconds() const { return timeout_; }
  // Host of every rank (the cluster table), so messages say where a missing rank runs.
  // Until it is set, ranks are named by number only.
  void set_hosts(std::vector<std::string> hosts);

  // Marks one blocking collective as in flight for its lifetime. Several threads may
  // each hold one (the main thread and the communication thread).
  class Scope {
   public:
    Scope(CollectiveWatchdog* watchdog, const char* operation, size_t count);
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
  };
  struct PeerState {
    int64_t completed = -1;          // collectives the peer had completed when it last spoke
    int32_t in_collective = 0;
    std::chrono::steady_clock::time_point heard;
  };

  size_t begin(const char* operation, size_t count);
  void end(size_t slot);
  void run();
  void send_heartbeats();
  void receive_heartbeats();
  void check_deadlines();
  void warn(const InFlight& stalled, double waited);
  [[noreturn]] void abort_job(const InFlight& stalled, double waited);
  std::string describe_missing(int64_t my_completed) const;
  std::string rank_and_host(int rank) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  double timeout_;
  std::chrono::steady_clock::time_point started_;

  mutable std::mutex mutex_;
  std::vector<InFlight> in_flight_;       // one slot per thread that is in a collective
  std::atomic<int64_t> completed_{0};     // collectives finished by this rank
  std::atomic<uint64_t> issued_{0};
  std::vector<PeerState> peers_;          // rank 0: every rank; others: rank 0 only
  std::vector<MPI_Request> pending_sends_;
  std::vector<std::array<int64_t, 2>> send_buffers_;
  std::vector<std::string> hosts_;             // guarded by mutex_
  uint64_t warned_sequence_ = UINT64_MAX;      // the collective already warned about

  std::atomic<bool> stopping_{false};
  std::condition_variable wake_;
  std::thread thread_;
};

}  // namespace mirrored::comm
