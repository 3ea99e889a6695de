#include "mirrored/comm/watchdog.h"

#include <cstdio>

#include "mirrored/comm/abort.h"
#include "mirrored/comm/fault_tolerance.h"
#include "mirrored/comm/mpi_check.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/core/process.h"

namespace mirrored::comm {
namespace {
using Clock = std::chrono::steady_clock;
constexpr auto kHeartbeatInterval = std::chrono::milliseconds(500);
constexpr auto kPollInterval = std::chrono::milliseconds(100);
// A peer is "silent" after missing this many heartbeats.
constexpr double kSilentAfterSeconds = 2.0;
// Non-chief ranks give rank 0 this long past the deadline to diagnose and abort the job,
// so the message that names the missing ranks is the one the user sees.
constexpr double kChiefGraceSeconds = 3.0;
constexpr int kTagToChief = 1, kTagFromChief = 2;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

CollectiveWatchdog::CollectiveWatchdog(MPI_Comm world, double timeout_seconds)
    : timeout_(timeout_seconds), started_(Clock::now()) {
  MIRRORED_MPI_CHECK(MPI_Comm_dup(world, &comm_));
  track_communicator(comm_);  // fault_tolerance.h: revoked with the job's others on a failure
  MIRRORED_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  MIRRORED_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  peers_.assign(static_cast<size_t>(size_), PeerState{-1, 0, Clock::now()});
  pending_sends_.assign(static_cast<size_t>(size_), MPI_REQUEST_NULL);
  send_buffers_.assign(static_cast<size_t>(size_), {0, 0});
  if (timeout_ > 0 && size_ > 1) thread_ = std::thread([this] { run(); });
}

CollectiveWatchdog::~CollectiveWatchdog() {
  if (thread_.joinable()) {
    stopping_ = true;
    wake_.notify_all();
    thread_.join();
  }
}

CollectiveWatchdog::Scope::Scope(CollectiveWatchdog* watchdog, const char* operation, size_t count)
    : watchdog_(watchdog) {
  if (watchdog_) slot_ = watchdog_->begin(operation, count);
}

CollectiveWatchdog::Scope::~Scope() {
  if (watchdog_) watchdog_->end(slot_);
}

void CollectiveWatchdog::set_hosts(std::vector<std::string> hosts) {
  std::lock_guard lock(mutex_);
  hosts_ = std::move(hosts);
}

std::string CollectiveWatchdog::rank_and_host(int rank) const {
  std::lock_guard lock(mutex_);
  if (rank < 0 || static_cast<size_t>(rank) >= hosts_.size()) return str_cat("rank ", rank);
  return str_cat("rank ", rank, " on ", hosts_[static_cast<size_t>(rank)]);
}

size_t CollectiveWatchdog::begin(const char* operation, size_t count) {
  std::lock_guard lock(mutex_);
  size_t slot = 0;
  while (slot < in_flight_.size() && in_flight_[slot].active) ++slot;
  if (slot == in_flight_.size()) in_flight_.emplace_back();
  in_flight_[slot] = InFlight{operation, count, issued_++, Clock::now(), true};
  return slot;
}

void CollectiveWatchdog::end(size_t slot) {
  std::lock_guard lock(mutex_);
  in_flight_[slot].active = false;
  ++completed_;
}

void CollectiveWatchdog::stop() {
  if (comm_ == MPI_COMM_NULL) return;
  if (thread_.joinable()) {
    stopping_ = true;
    wake_.notify_all();
    thread_.join();
  }
  // Heartbeats are a few bytes and sent eagerly; whatever is still pending or unreceived
  // is released here, after every rank has stopped sending.
  for (auto& request : pending_sends_)
    if (request != MPI_REQUEST_NULL) MIRRORED_MPI_LOG(MPI_Request_free(&request));
  MIRRORED_MPI_LOG(MPI_Barrier(comm_));
  receive_heartbeats();
  untrack_communicator(comm_);
  MIRRORED_MPI_LOG(MPI_Comm_free(&comm_));
}

void CollectiveWatchdog::run() {
  auto next_heartbeat = Clock::now();
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    if (Clock::now() >= next_heartbeat) {
      send_heartbeats();
      next_heartbeat = Clock::now() + kHeartbeatInterval;
    }
    receive_heartbeats();
    check_deadlines();
    lock.lock();
    wake_.wait_for(lock, kPollInterval, [this] { return stopping_.load(); });
  }
}

void CollectiveWatchdog::send_heartbeats() {
  int32_t in_collective = 0;
  {
    std::lock_guard lock(mutex_);
    for (const auto& f : in_flight_) in_collective += f.active ? 1 : 0;
  }
  auto send_to = [&](int peer, int tag) {
    auto& request = pending_sends_[static_cast<size_t>(peer)];
    if (request != MPI_REQUEST_NULL) {
      int done = 0;
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (!done) return;  // the peer is not draining: never queue more than one
    }
    auto& buffer = send_buffers_[static_cast<size_t>(peer)];
    buffer = {completed_.load(), in_collective};
    MPI_Isend(buffer.data(), 2, MPI_INT64_T, peer, tag, comm_, &request);
  };
  if (rank_ == 0) {
    for (int peer = 1; peer < size_; ++peer) send_to(peer, kTagFromChief);
  } else {
    send_to(0, kTagToChief);
  }
}

void CollectiveWatchdog::receive_heartbeats() {
  while (true) {
    int arrived = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &arrived, &status) != MPI_SUCCESS || !arrived) return;
    std::array<int64_t, 2> beat{};
    MPI_Recv(beat.data(), 2, MPI_INT64_T, status.MPI_SOURCE, status.MPI_TAG, comm_, MPI_STATUS_IGNORE);
    auto& peer = peers_[static_cast<size_t>(status.MPI_SOURCE)];
    peer.completed = beat[0];
    peer.in_collective = static_cast<int32_t>(beat[1]);
    peer.heard = Clock::now();
  }
}

void CollectiveWatchdog::check_deadlines() {
  InFlight oldest;
  {
    std::lock_guard lock(mutex_);
    for (const auto& f : in_flight_)
      if (f.active && (!oldest.active || f.since < oldest.since)) oldest = f;
  }
  if (!oldest.active) return;
  const double waited = seconds_since(oldest.since);
  // The warning stage: the chief, which hears from every rank, says who is missing while
  // there is still time to look (once per stalled collective).
  if (rank_ == 0 && waited > timeout_ / 2 && oldest.sequence != warned_sequence_) {
    warned_sequence_ = oldest.sequence;
    warn(oldest, waited);
  }
  if (waited <= timeout_) return;
  const bool chief_silent = rank_ != 0 && seconds_since(peers_[0].heard) > kSilentAfterSeconds;
  if (rank_ == 0 || chief_silent || waited > timeout_ + kChiefGraceSeconds) abort_job(oldest, waited);
}

std::string CollectiveWatchdog::describe_missing(int64_t my_completed) const {
  // Silent and busy ranks explain a stall; completed-count differences are only a hint
  // (two communicators interleave differently per rank), so they are listed only when
  // nothing better is known.
  std::vector<std::string> culprits, hints;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    if (rank_ != 0 && r != 0) continue;  // only rank 0 hears from everyone
    const auto& peer = peers_[static_cast<size_t>(r)];
    const double silent = seconds_since(peer.heard);
    if (peer.completed < 0 && silent > kSilentAfterSeconds) {
      culprits.push_back(rank_and_host(r) + " (never heard from: not started, stopped or dead)");
    } else if (silent > kSilentAfterSeconds) {
      culprits.push_back(str_cat(rank_and_host(r), " (silent for ", static_cast<int>(silent),
                                 " s: stopped, killed or unreachable)"));
    } else if (peer.in_collective == 0) {
      culprits.push_back(rank_and_host(r) + " (alive but outside any collective: busy or hung in compute or I/O)");
    } else if (peer.completed != my_completed) {
      hints.push_back(str_cat(rank_and_host(r), " (in a collective after ", peer.completed, " completed, vs ",
                              my_completed, " here)"));
    }
  }
  if (!culprits.empty()) return "did not arrive: " + join(culprits, "; ");
  if (!hints.empty()) return "every rank is inside a collective, possibly different ones: " + join(hints, "; ");
  return rank_ == 0 ? "every rank is waiting in a collective (a mismatched collective order?)"
                    : "rank 0 is alive and names the missing ranks";
}

void CollectiveWatchdog::warn(const InFlight& stalled, double waited) {
  rank_warning(str_cat("collective warning: ", stalled.operation, " #", stalled.sequence, " (", stalled.count,
                       " elements) has waited ", static_cast<int>(waited), " s, half of collective_timeout_s = ",
                       timeout_, " s; ", describe_missing(completed_.load()), ". The job aborts at ", timeout_,
                       " s unless they arrive."));
  std::fflush(stderr);
}

void CollectiveWatchdog::abort_job(const InFlight& stalled, double waited) {
  comm::abort_job(ExitCode::kCommTimeout,
                  str_cat("collective timeout: ", stalled.operation, " #", stalled.sequence, " (", stalled.count,
                          " elements) did not complete within ", timeout_, " s (waited ", static_cast<int>(waited),
                          " s); ", describe_missing(completed_.load()), ". Aborting the job (collective_timeout_s)."));
}

}  // namespace mirrored::comm
