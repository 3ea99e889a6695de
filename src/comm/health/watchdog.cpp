#include "mirrored/comm/health/watchdog.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "mirrored/comm/failure/abort.h"
#include "mirrored/comm/failure/fault_tolerance.h"
#include "mirrored/comm/failure/mpi_check.h"
#include "mirrored/comm/failure/runtime_loss.h"
#include "mirrored/comm/health/collective_verdict.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/core/process.h"
#include "watchdog_protocol.h"

namespace mirrored::comm {
namespace {
using namespace watchdog_protocol;

template <size_t N>
void copy_name(char (&to)[N], const std::string& from) {
  std::memset(to, 0, N);
  std::memcpy(to, from.data(), std::min(from.size(), N - 1));
}

// The watchdog whose rings comm::abort_job dumps before ending the job.
std::atomic<CollectiveWatchdog*> g_watchdog{nullptr};
}  // namespace

CollectiveWatchdog::CollectiveWatchdog(MPI_Comm world, double timeout_seconds, size_t trace_collectives,
                                       OnTimeout on_timeout)
    : timeout_(timeout_seconds), on_timeout_(on_timeout), started_(Clock::now()), recorder_(trace_collectives) {
  MIRRORED_MPI_CHECK(MPI_Comm_dup(world, &comm_));
  track_communicator(comm_);  // comm/failure/fault_tolerance.h: revoked with the job's others on a failure
  MIRRORED_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  MIRRORED_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  PeerState unheard;
  unheard.heard = Clock::now();
  peers_.assign(static_cast<size_t>(size_), unheard);
  pending_sends_.assign(static_cast<size_t>(size_), MPI_REQUEST_NULL);
  send_buffers_.assign(static_cast<size_t>(size_), Heartbeat{});
  g_watchdog = this;
  set_abort_hook(&CollectiveWatchdog::dump_before_abort);
  set_quiesce_hook(&CollectiveWatchdog::stop_thread_for_exit);
  if (timeout_ > 0 && size_ > 1) thread_ = std::thread([this] { run(); });
}

CollectiveWatchdog::~CollectiveWatchdog() {
  CollectiveWatchdog* self = this;
  if (g_watchdog.compare_exchange_strong(self, nullptr)) {
    set_abort_hook(nullptr);
    set_quiesce_hook(nullptr);
  }
  if (thread_.joinable()) {
    stopping_ = true;
    wake_.notify_all();
    thread_.join();
  }
}

CollectiveWatchdog::Scope::Scope(CollectiveWatchdog* watchdog, const CollectiveCall& call) : watchdog_(watchdog) {
  if (watchdog_) slot_ = watchdog_->begin(call);
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

size_t CollectiveWatchdog::begin(const CollectiveCall& call) {
  const FlightRecorder::Ticket ticket = recorder_.start(call);
  std::lock_guard lock(mutex_);
  size_t slot = 0;
  while (slot < in_flight_.size() && in_flight_[slot].active) ++slot;
  if (slot == in_flight_.size()) in_flight_.emplace_back();
  in_flight_[slot] = InFlight{call.operation, call.count, issued_++, Clock::now(), true, call, ticket};
  return slot;
}

void CollectiveWatchdog::end(size_t slot) {
  FlightRecorder::Ticket ticket;
  {
    std::lock_guard lock(mutex_);
    in_flight_[slot].active = false;
    ticket = in_flight_[slot].ticket;
    ++completed_;
  }
  recorder_.finish(ticket);
}

void CollectiveWatchdog::stop() {
  if (comm_ == MPI_COMM_NULL) return;
  if (thread_.joinable()) {
    stopping_ = true;
    wake_.notify_all();
    thread_.join();
  }
  // After a peer's failure the communicator is revoked and this barrier fails as expected;
  // the failure itself is reported once, by the recovery.
  if (const int status = MPI_Barrier(comm_); status != MPI_SUCCESS && !is_peer_failure(status))
    rank_warning(where(__FILE__, __LINE__, str_cat("MPI_Barrier(comm_): ", mpi_error_string(status))));
  receive_heartbeats();
  complete_pending_sends();
  untrack_communicator(comm_);
  MIRRORED_MPI_LOG(MPI_Comm_free(&comm_));
}

// Heartbeats still being sent are completed, never freed: a send freed while pending that
// then fails (its peer died) is reported on no communicator, which Open MPI makes fatal to
// the survivor. After every rank stopped sending and received what was sent, a send to a
// live peer completes at once, and one on a revoked communicator completes with an error;
// a send still pending after a second (a few bytes) is left to MPI.
void CollectiveWatchdog::complete_pending_sends() {
  const auto started = Clock::now();
  for (;;) {
    bool pending = false;
    for (auto& request : pending_sends_) {
      if (request == MPI_REQUEST_NULL) continue;
      int done = 0;
      if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) request = MPI_REQUEST_NULL;  // failed: complete
      pending = pending || request != MPI_REQUEST_NULL;
    }
    if (!pending || seconds_since(started) > 1.0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void CollectiveWatchdog::stop_thread_for_exit() {
  CollectiveWatchdog* watchdog = g_watchdog.load();
  if (watchdog == nullptr || !watchdog->thread_.joinable() || watchdog->thread_.get_id() == std::this_thread::get_id())
    return;
  watchdog->stopping_ = true;
  watchdog->wake_.notify_all();
  watchdog->thread_.join();
}

void CollectiveWatchdog::dump_before_abort(ExitCode code) {
  // Errors that explain themselves (bad input, a bad checkpoint, NaN, preemption) need no
  // trace; an unexpected failure or a timeout may be a communication problem.
  if (code != ExitCode::kFailure && code != ExitCode::kCommTimeout) return;
  if (CollectiveWatchdog* watchdog = g_watchdog.load()) watchdog->dump_everywhere("error");
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
    if (take_trace_dump_request()) dump_trace("signal");
    exit_if_orphaned();
    check_deadlines();
    lock.lock();
    wake_.wait_for(lock, kPollInterval, [this] { return stopping_.load(); });
  }
}

CollectiveWatchdog::Heartbeat CollectiveWatchdog::my_heartbeat() {
  Heartbeat beat;
  const InFlight* oldest = nullptr;
  {
    std::lock_guard lock(mutex_);
    for (const auto& f : in_flight_) {
      if (!f.active) continue;
      ++beat.in_collective;
      if (!oldest || f.since < oldest->since) oldest = &f;
    }
    if (oldest) {
      beat.has_collective = 1;
      beat.sequence = oldest->ticket.sequence;
      beat.fingerprint = oldest->ticket.fingerprint;
      beat.count = oldest->call.count;
      beat.type = static_cast<int32_t>(oldest->call.type);
      copy_name(beat.operation, oldest->call.operation);
      const CollectiveRecord record = recorder_.describe(oldest->call, oldest->ticket);
      copy_name(beat.communicator, record.communicator);
      copy_name(beat.site, record.site);
    }
  }
  beat.completed = completed_.load();
  beat.step = step_.load();
  return beat;
}

void CollectiveWatchdog::send_heartbeats() {
  const Heartbeat beat = my_heartbeat();
  auto send_to = [&](int peer, int tag) {
    auto& request = pending_sends_[static_cast<size_t>(peer)];
    if (request != MPI_REQUEST_NULL) {
      int done = 0;
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (!done) return;  // the peer is not draining: never queue more than one
    }
    auto& buffer = send_buffers_[static_cast<size_t>(peer)];
    buffer = beat;
    MPI_Isend(&buffer, sizeof(Heartbeat), MPI_BYTE, peer, tag, comm_, &request);
  };
  if (rank_ == 0) {
    for (int peer = 1; peer < size_; ++peer) send_to(peer, kTagFromChief);
  } else {
    send_to(0, kTagToChief);
  }
}

void CollectiveWatchdog::take_heartbeat(int source, const Heartbeat& beat) {
  std::lock_guard lock(mutex_);
  auto& peer = peers_[static_cast<size_t>(source)];
  peer.completed = beat.completed;
  peer.in_collective = static_cast<int32_t>(beat.in_collective);
  peer.step = beat.step;
  peer.has_collective = beat.has_collective != 0;
  if (peer.has_collective) {
    auto text = [](const char* field, size_t size) { return std::string(field, strnlen(field, size)); };
    peer.collective.sequence = beat.sequence;
    peer.collective.fingerprint = beat.fingerprint;
    peer.collective.count = beat.count;
    peer.collective.type = datatype_name(static_cast<DataType>(beat.type));
    peer.collective.operation = text(beat.operation, sizeof(beat.operation));
    peer.collective.communicator = text(beat.communicator, sizeof(beat.communicator));
    peer.collective.site = text(beat.site, sizeof(beat.site));
  }
  peer.heard = Clock::now();
}

void CollectiveWatchdog::receive_heartbeats() {
  while (true) {
    int arrived = 0;
    MPI_Status status;
    MPI_Message message;
    // Matched probes: the main thread may receive here too while it waits for dumps.
    const int probed = MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &arrived, &message, &status);
    // A failed or revoking peer, heard here first while the main thread waits outside MPI
    // (in an NCCL collective): the news goes to every communicator of the process.
    if (probed != MPI_SUCCESS) (void)note_failure(probed);
    if (probed != MPI_SUCCESS || !arrived) return;
    Heartbeat beat;
    MPI_Mrecv(&beat, sizeof(Heartbeat), MPI_BYTE, &message, MPI_STATUS_IGNORE);
    switch (status.MPI_TAG) {
      case kTagDumpRequest: on_dump_request(status.MPI_SOURCE); break;
      case kTagDumpDone: ++dumps_acknowledged_; break;
      default: take_heartbeat(status.MPI_SOURCE, beat);
    }
  }
}

void CollectiveWatchdog::check_deadlines() {
  if (revoked_ && seconds_since(revoked_at_) > timeout_) abort_unrecovered();
  InFlight oldest;
  Clock::time_point chief_heard;
  {
    std::lock_guard lock(mutex_);
    for (const auto& f : in_flight_)
      if (f.active && (!oldest.active || f.since < oldest.since)) oldest = f;
    chief_heard = peers_[0].heard;
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
  const bool chief_silent = rank_ != 0 && seconds_since(chief_heard) > kSilentAfterSeconds;
  if (rank_ != 0 && !chief_silent && waited <= timeout_ + kChiefGraceSeconds) return;
  if (on_timeout_ == OnTimeout::kAbort) abort_job(oldest, waited);
  if (!revoked_) revoke(oldest, waited);
}

std::string CollectiveWatchdog::describe_missing(int64_t my_completed, const InFlight* stalled) const {
  // Silent and busy ranks explain a stall, and so does a rank running another collective at
  // the same sequence number (the fingerprints on the heartbeats differ). Completed-count
  // differences are only a hint (two communicators interleave differently per rank), so
  // they are listed only when nothing better is known.
  std::vector<PeerState> peers;
  {
    std::lock_guard lock(mutex_);
    peers = peers_;
  }
  const CollectiveRecord mine = stalled ? recorder_.describe(stalled->call, stalled->ticket) : CollectiveRecord{};
  std::vector<std::string> culprits, mismatches, hints, late;
  bool all_same = stalled != nullptr;
  int slowest = rank_;
  int64_t slowest_step = step_.load();
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    if (rank_ != 0 && r != 0) continue;  // only rank 0 hears from everyone
    const auto& peer = peers[static_cast<size_t>(r)];
    const double silent = seconds_since(peer.heard);
    const bool alive = silent <= kSilentAfterSeconds;
    if (alive && silent > kLateAfterSeconds)
      late.push_back(str_cat(rank_and_host(r), " (last heard ", static_cast<int>(silent), ".",
                             static_cast<int>(silent * 10) % 10, " s ago)"));
    if (alive && peer.step >= 0 && (slowest_step < 0 || peer.step < slowest_step)) {
      slowest = r;
      slowest_step = peer.step;
    }
    all_same = all_same && alive && peer.has_collective && peer.collective.fingerprint == mine.fingerprint &&
               peer.collective.sequence == mine.sequence;
    if (peer.completed < 0 && !alive) {
      culprits.push_back(rank_and_host(r) + " (never heard from: not started, stopped or dead)");
    } else if (!alive) {
      culprits.push_back(str_cat(rank_and_host(r), " (silent for ", static_cast<int>(silent),
                                 " s: stopped, killed or unreachable)"));
    } else if (peer.in_collective == 0) {
      culprits.push_back(rank_and_host(r) + " (alive but outside any collective: busy or hung in compute or I/O)");
    } else if (std::string m = stalled && peer.has_collective
                                   ? collective_mismatch(mine, rank_and_host(rank_), peer.collective, rank_and_host(r))
                                   : std::string();
               !m.empty()) {
      mismatches.push_back(m);
    } else if (peer.completed != my_completed) {
      hints.push_back(peer.has_collective
                          ? str_cat(rank_and_host(r), " (in ", describe_collective(peer.collective), ")")
                          : str_cat(rank_and_host(r), " (in a collective after ", peer.completed,
                                    " completed, vs ", my_completed, " here)"));
    }
  }
  if (!mismatches.empty())
    return "ranks ran different collectives (mismatched collective order): " + join(mismatches, "; ");
  if (!culprits.empty()) return "did not arrive: " + join(culprits, "; ");
  // A rank stopped inside this collective reads as alive and in it until it has been silent
  // for kSilentAfterSeconds, which may be after the warning: ranks already late come first.
  const std::string lead = late.empty() ? "" : "heartbeats late from " + join(late, "; ") + "; ";
  if (!hints.empty()) return lead + "every rank is inside a collective, possibly different ones: " + join(hints, "; ");
  if (rank_ != 0) return lead + "rank 0 is alive and names the missing ranks";
  if (all_same && slowest_step >= 0)
    return str_cat(lead, "every rank is alive and waiting in this same collective; the slowest rank's last completed "
                   "step: ", rank_and_host(slowest), " at step ", slowest_step);
  return lead + "every rank is waiting in a collective (a mismatched collective order?)";
}

std::string CollectiveWatchdog::describe_stalled(const InFlight& stalled) const {
  return describe_collective(recorder_.describe(stalled.call, stalled.ticket));
}

void CollectiveWatchdog::warn(const InFlight& stalled, double waited) {
  rank_warning(str_cat("collective warning: ", describe_stalled(stalled), " has waited ", static_cast<int>(waited),
                       " s, half of collective_timeout_s = ", timeout_, " s; ",
                       describe_missing(completed_.load(), &stalled), ". ",
                       on_timeout_ == OnTimeout::kAbort
                           ? str_cat("The job aborts at ", timeout_, " s unless they arrive.")
                           : str_cat("At ", timeout_, " s the others go on without them (on_failure = shrink).")));
  std::fflush(stderr);
}

void CollectiveWatchdog::abort_job(const InFlight& stalled, double waited) {
  // The verdict first, then every reachable rank's flight recorder, then the end.
  rank_error(str_cat("collective timeout: ", describe_stalled(stalled), " did not complete within ", timeout_,
                     " s (waited ", static_cast<int>(waited), " s); ", describe_missing(completed_.load(), &stalled),
                     ". Aborting the job (collective_timeout_s)."));
  std::fflush(stderr);
  dump_everywhere("timeout");
  comm::abort_job(ExitCode::kCommTimeout);
}

void CollectiveWatchdog::revoke(const InFlight& stalled, double waited) {
  rank_warning(str_cat("collective timeout: ", describe_stalled(stalled), " did not complete within ", timeout_,
                       " s (waited ", static_cast<int>(waited), " s); ", describe_missing(completed_.load(), &stalled),
                       ". on_failure = shrink: revoking the job's communicators, so the others go on without the "
                       "ranks that do not answer once MPI's failure detector declares them failed"));
  std::fflush(stderr);
  revoked_ = true;
  revoked_at_ = Clock::now();
  revoke_tracked_communicators();
}

void CollectiveWatchdog::abort_unrecovered() {
  rank_error(str_cat("collective timeout: ", timeout_, " s after revoking the job's communicators, the others "
                     "have still not agreed on who is lost (a rank alive but hung, which MPI's failure detector "
                     "still hears?). Aborting the job (collective_timeout_s)."));
  std::fflush(stderr);
  dump_trace("timeout");  // this rank's only: the watchdog's own communicator is revoked
  comm::abort_job(ExitCode::kCommTimeout);
}

void CollectiveWatchdog::exit_if_orphaned() const {
  const int64_t daemon = launcher_daemon_.load();
  if (!abandoned_by_launcher(daemon)) return;
  rank_error(str_cat("the launcher daemon that started this rank (pid ", daemon,
                     ") is gone: the MPI runtime ended the job, or this node's daemon died; exiting"));
  std::fflush(nullptr);
  std::_Exit(static_cast<int>(ExitCode::kCommTimeout));
}

}  // namespace mirrored::comm
