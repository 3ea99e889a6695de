#pragma once
// From what ranks were doing to one sentence about why a job is stuck (PyTorch's flight
// recorder analyser: "not all ranks joining collective 5 ... missing ranks: {1}"). Pure
// functions: the watchdog applies them to its heartbeats, `mirrored trace` to the dumps
// of the flight recorder (flight_recorder.h).
#include <cstdint>
#include <string>
#include <vector>

#include "mirrored/comm/health/flight_recorder.h"

namespace mirrored::comm {

// One rank's dump: its ring, oldest first. `present` false: the rank left no dump
// (stopped, dead or unreachable when the others wrote theirs).
struct RankTrace {
  int rank = 0;
  std::string host;
  bool present = false;
  int64_t step = -1;  // the last training step it completed (-1: unknown)
  std::string reason;  // why it dumped: "timeout", "signal", "error", "peer"
  // The chief's dump: the ranks it had not heard from for seconds when it dumped. A rank
  // stopped inside a collective has joined it; only this tells it from the ranks waiting.
  std::vector<int> silent;
  std::vector<CollectiveRecord> records;
};

enum class VerdictKind {
  kNoTrace,       // no rank left a dump
  kIdle,          // nothing in flight on any rank: every recorded collective completed
  kMissing,       // some ranks did not join the oldest collective in flight
  kSilent,        // every rank joined it, but some went silent inside it (stopped, hung)
  kMismatch,      // ranks ran different collectives at the same sequence number
  kAllWaiting,    // every rank joined the same collective and waits in it
};

struct Verdict {
  VerdictKind kind = VerdictKind::kNoTrace;
  std::string headline;                // the first line `mirrored trace` prints
  std::vector<std::string> details;    // one line per rank (or group), after it
  std::vector<int> ranks;              // the ranks the verdict names (missing or differing)
};

// `ranks` holds every rank of the world, in rank order (absent ones with present false).
// The collective judged is the oldest one still in flight on any rank (by start time).
Verdict trace_verdict(const std::vector<RankTrace>& ranks);

// The heartbeat's view: a peer in a collective at the same sequence number on the same
// communicator as `mine` but with another fingerprint ran a different collective. Returns
// "rank 1 on h runs barrier #7 on world (...) where rank 0 runs allreduce #7 on world (...)",
// or "" when they match or cannot be compared (other communicators or sequence numbers).
std::string collective_mismatch(const CollectiveRecord& mine, const std::string& me, const CollectiveRecord& theirs,
                                const std::string& them);

}  // namespace mirrored::comm
