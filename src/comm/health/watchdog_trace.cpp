// The collective watchdog's part in the flight recorder (flight_recorder.h): where dumps
// go, writing this rank's, and having every reachable rank write theirs before a failing
// job ends. Heartbeats and deadlines are in watchdog.cpp.
#include <filesystem>
#include <thread>

#include "mirrored/comm/health/watchdog.h"
#include "mirrored/core/log.h"
#include "mirrored/core/strings.h"
#include "watchdog_protocol.h"

namespace mirrored::comm {
using namespace watchdog_protocol;

void CollectiveWatchdog::set_trace_directory(const std::string& directory) {
  std::lock_guard lock(mutex_);
  trace_directory_ = directory;
}

bool CollectiveWatchdog::dump_trace(const char* reason) {
  std::string directory, host;
  {
    std::lock_guard lock(mutex_);
    directory = trace_directory_;
    if (static_cast<size_t>(rank_) < hosts_.size()) host = hosts_[static_cast<size_t>(rank_)];
  }
  if (directory.empty()) return false;
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  const std::string path = str_cat(directory, "/rank-", rank_, ".jsonl");
  // The chief's view of whom it has not heard from lately (it hears every rank; the others
  // hear only the chief, which stops beating while it collects the dumps, so theirs would
  // name it wrongly).
  std::string silent;
  if (rank_ == 0 && thread_.joinable()) {
    std::lock_guard lock(mutex_);
    for (int r = 1; r < size_; ++r) {
      if (seconds_since(peers_[static_cast<size_t>(r)].heard) > kSilentAfterSeconds)
        silent += str_cat(silent.empty() ? "" : ", ", r);
    }
  }
  const std::string header = str_cat("\"rank\": ", rank_, ", \"world\": ", size_, ", \"host\": \"", host,
                                     "\", \"reason\": \"", reason, "\", \"step\": ", step_.load(),
                                     ", \"collective_timeout_s\": ", timeout_, ", \"silent\": [", silent, "]");
  if (!recorder_.dump(path, header)) return false;
  rank_warning(str_cat("flight recorder (", reason, "): wrote its last ",
                       std::min<uint64_t>(recorder_.recorded(), recorder_.capacity()), " collectives to ", path,
                       " (mirrored trace reads them)"));
  return true;
}

void CollectiveWatchdog::dump_everywhere(const char* reason) {
  if (dumped_for_abort_.exchange(true)) return;
  {
    std::lock_guard lock(mutex_);
    if (trace_directory_.empty()) return;
  }
  if (!thread_.joinable() || comm_ == MPI_COMM_NULL) {
    dump_trace(reason);
    return;
  }
  // Who can still answer: on the chief, every rank heard from lately; elsewhere, the chief
  // passes the request on and nobody answers here, so this rank waits a while instead.
  int expected = 0;
  Heartbeat request;
  request.step = step_.load();
  std::vector<MPI_Request> sent;
  auto ask = [&](int peer) {
    MPI_Request r;
    if (MPI_Isend(&request, sizeof(Heartbeat), MPI_BYTE, peer, kTagDumpRequest, comm_, &r) == MPI_SUCCESS)
      sent.push_back(r);
  };
  if (rank_ == 0) {
    for (int peer = 1; peer < size_; ++peer) {
      bool reachable = false;
      {
        std::lock_guard lock(mutex_);
        reachable = seconds_since(peers_[static_cast<size_t>(peer)].heard) <= kSilentAfterSeconds &&
                    peers_[static_cast<size_t>(peer)].completed >= 0;
      }
      if (reachable) {
        ask(peer);
        ++expected;
      }
    }
  } else {
    ask(0);
  }
  dump_trace(reason);
  const auto started = Clock::now();
  const double wait = rank_ == 0 ? kDumpWaitSeconds : 1.0;
  while ((rank_ != 0 || dumps_acknowledged_.load() < expected) && seconds_since(started) < wait) {
    receive_heartbeats();  // matched receives: safe beside the watchdog thread's own
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (rank_ == 0 && dumps_acknowledged_.load() < expected)
    rank_warning(str_cat("flight recorder: ", expected - dumps_acknowledged_.load(), " of ", expected,
                         " ranks did not confirm their dump within ", kDumpWaitSeconds, " s"));
  for (auto& r : sent) MPI_Request_free(&r);
}

void CollectiveWatchdog::on_dump_request(int source) {
  if (rank_ == 0) {
    // A failing rank asks: pass the request on to every other rank still heard from (a
    // stopped rank woken by the launcher's SIGCONT on its way out would dump a stale view),
    // and dump here.
    Heartbeat request;
    for (int peer = 1; peer < size_; ++peer) {
      if (peer == source) continue;
      {
        std::lock_guard lock(mutex_);
        if (seconds_since(peers_[static_cast<size_t>(peer)].heard) > kSilentAfterSeconds) continue;
      }
      MPI_Request r;
      if (MPI_Isend(&request, sizeof(Heartbeat), MPI_BYTE, peer, kTagDumpRequest, comm_, &r) == MPI_SUCCESS)
        MPI_Request_free(&r);  // eager: a few bytes
    }
    if (!dumped_for_abort_.exchange(true)) dump_trace("peer");
    return;
  }
  if (!dumped_for_abort_.exchange(true)) dump_trace("peer");
  static Heartbeat done;  // the buffer outlives the send
  MPI_Request r;
  if (MPI_Isend(&done, sizeof(Heartbeat), MPI_BYTE, 0, kTagDumpDone, comm_, &r) == MPI_SUCCESS) MPI_Request_free(&r);
}

}  // namespace mirrored::comm
