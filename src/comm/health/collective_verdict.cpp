#include "mirrored/comm/health/collective_verdict.h"

#include <algorithm>
#include <map>

#include "mirrored/core/strings.h"

namespace mirrored::comm {
namespace {

std::string rank_name(const RankTrace& rank) {
  return rank.host.empty() ? str_cat("rank ", rank.rank) : str_cat("rank ", rank.rank, " on ", rank.host);
}

std::string rank_set(const std::vector<int>& ranks) {
  std::string text = "{";
  for (size_t i = 0; i < ranks.size(); ++i) text += str_cat(i ? ", " : "", ranks[i]);
  return text + "}";
}

// "rank 3" or "ranks {1, 2}", the subject of a verdict's sentence.
std::string ranks_phrase(const std::vector<int>& ranks) {
  return ranks.size() == 1 ? str_cat("rank ", ranks[0]) : str_cat("ranks ", rank_set(ranks));
}

// The same collective without its sequence number: what must be equal across ranks.
std::string what_ran(const CollectiveRecord& r) {
  std::string text = str_cat(r.operation, " of ", r.count, " ", r.type);
  if (!r.site.empty()) text += str_cat(" (", r.site, ")");
  return text;
}

const CollectiveRecord* find(const RankTrace& rank, const std::string& communicator, uint64_t sequence) {
  for (const auto& r : rank.records)
    if (r.communicator == communicator && r.sequence == sequence) return &r;
  return nullptr;
}

// The highest sequence number a rank recorded on a communicator (-1: none).
int64_t last_sequence(const RankTrace& rank, const std::string& communicator) {
  int64_t last = -1;
  for (const auto& r : rank.records)
    if (r.communicator == communicator) last = std::max(last, static_cast<int64_t>(r.sequence));
  return last;
}

// ", step 12", or "" when the rank's step is unknown.
std::string step_suffix(const RankTrace& rank) { return rank.step >= 0 ? str_cat(", step ", rank.step) : ""; }

int ranks_present(const std::vector<RankTrace>& ranks) {
  return static_cast<int>(std::count_if(ranks.begin(), ranks.end(), [](const RankTrace& r) { return r.present; }));
}

// The collective a verdict is about: the one started longest ago, by start time, of those
// still in flight on any rank that left a dump. Both null when none is in flight.
struct OldestInFlight {
  const RankTrace* rank = nullptr;
  const CollectiveRecord* record = nullptr;
};

OldestInFlight oldest_in_flight(const std::vector<RankTrace>& ranks) {
  OldestInFlight oldest;
  for (const auto& rank : ranks) {
    if (!rank.present) continue;
    for (const auto& r : rank.records)
      if (!r.completed() && (!oldest.record || r.start_us < oldest.record->start_us)) oldest = {&rank, &r};
  }
  return oldest;
}

Verdict no_trace_verdict() {
  Verdict verdict;
  verdict.headline = "no trace: no rank left a dump (trace/rank-<r>.jsonl)";
  return verdict;
}

// Nothing in flight: each rank's count of collectives and its last one.
Verdict idle_verdict(const std::vector<RankTrace>& ranks) {
  Verdict verdict;
  verdict.kind = VerdictKind::kIdle;
  verdict.headline = "no collective in flight: every collective the ranks recorded completed";
  std::vector<int> absent;
  for (const auto& rank : ranks)
    if (!rank.present) absent.push_back(rank.rank);
  if (!absent.empty()) verdict.headline += str_cat("; no dump from ranks ", rank_set(absent));
  for (const auto& rank : ranks)
    if (rank.present)
      verdict.details.push_back(str_cat(rank_name(rank), ": ", rank.records.size(), " collectives recorded",
                                        rank.records.empty() ? "" : ", last " + describe_collective(rank.records.back()),
                                        step_suffix(rank)));
  return verdict;
}

// Every rank's part in one collective: joined it (grouped by the fingerprint of what it
// ran), or not there (no dump, or no record of that sequence number); a line per rank.
struct Attendance {
  std::map<uint64_t, std::vector<const RankTrace*>> by_fingerprint;
  std::vector<int> joined;
  std::vector<int> missing;
  std::vector<std::string> details;
};

Attendance attendance(const std::vector<RankTrace>& ranks, const std::string& communicator, uint64_t sequence) {
  Attendance a;
  for (const auto& rank : ranks) {
    if (!rank.present) {
      a.missing.push_back(rank.rank);
      a.details.push_back(str_cat(rank_name(rank), ": no dump (stopped, dead or unreachable)"));
    } else if (const CollectiveRecord* r = find(rank, communicator, sequence)) {
      a.by_fingerprint[r->fingerprint].push_back(&rank);
      a.joined.push_back(rank.rank);
      a.details.push_back(str_cat(rank_name(rank), ": ", r->completed() ? "completed " : "waiting in ",
                                  describe_collective(*r), step_suffix(rank)));
    } else {
      a.missing.push_back(rank.rank);
      const int64_t last = last_sequence(rank, communicator);
      a.details.push_back(str_cat(rank_name(rank), ": not there; its last collective on ", communicator, " was ",
                                  last < 0 ? std::string("none recorded") : str_cat("#", last), step_suffix(rank)));
    }
  }
  return a;
}

// The judged collective, as the verdicts below name it: "collective #28 on world".
struct Judged {
  const RankTrace& oldest_rank;  // the rank whose call of it started first
  const CollectiveRecord& oldest;
  std::string name;
};

// Ranks ran different collectives at one sequence number: each group and what it ran, in
// the order of their lowest rank (rank 0's call first); the ranks outside the group of the
// oldest call are the ones named.
Verdict mismatch_verdict(const Attendance& a, const Judged& judged) {
  Verdict verdict;
  verdict.kind = VerdictKind::kMismatch;
  verdict.details = a.details;
  const std::string& communicator = judged.oldest.communicator;
  const uint64_t sequence = judged.oldest.sequence;
  const uint64_t reference = find(judged.oldest_rank, communicator, sequence)->fingerprint;
  std::vector<std::pair<uint64_t, std::vector<const RankTrace*>>> ordered(a.by_fingerprint.begin(),
                                                                          a.by_fingerprint.end());
  std::sort(ordered.begin(), ordered.end(),
            [](const auto& x, const auto& y) { return x.second.front()->rank < y.second.front()->rank; });
  std::vector<std::string> groups;
  for (const auto& [fingerprint, group] : ordered) {
    std::vector<int> members;
    for (const RankTrace* rank : group) {
      members.push_back(rank->rank);
      if (fingerprint != reference) verdict.ranks.push_back(rank->rank);
    }
    groups.push_back(str_cat(ranks_phrase(members), " ran ", what_ran(*find(*group.front(), communicator, sequence))));
  }
  verdict.headline = str_cat("mismatch at ", judged.name, ": ", join(groups, "; "),
                             " (every rank must issue the same collectives in the same order)");
  return verdict;
}

Verdict missing_verdict(const Attendance& a, const Judged& judged) {
  Verdict verdict;
  verdict.kind = VerdictKind::kMissing;
  verdict.details = a.details;
  verdict.ranks = a.missing;
  verdict.headline = str_cat(ranks_phrase(a.missing), " did not join ", judged.name, ": ", what_ran(judged.oldest),
                             "; ", ranks_phrase(a.joined), " joined it");
  return verdict;
}

// The ranks any dump (the chief's) says the watchdogs stopped hearing from, ascending.
std::vector<int> silent_ranks(const std::vector<RankTrace>& ranks) {
  std::vector<int> silent;
  for (const auto& rank : ranks)
    for (const int r : rank.silent)
      if (std::find(silent.begin(), silent.end(), r) == silent.end()) silent.push_back(r);
  std::sort(silent.begin(), silent.end());
  return silent;
}

// Everyone joined, and the `silent` ranks are stuck inside it; the others wait there.
Verdict silent_verdict(const Attendance& a, const Judged& judged, const std::vector<int>& silent) {
  Verdict verdict;
  verdict.kind = VerdictKind::kSilent;
  verdict.details = a.details;
  verdict.ranks = silent;
  std::vector<int> waiting;
  for (const int r : a.joined)
    if (!std::binary_search(silent.begin(), silent.end(), r)) waiting.push_back(r);
  verdict.headline = str_cat(ranks_phrase(silent), " stopped responding inside ", judged.name, ": ",
                             what_ran(judged.oldest), "; ", ranks_phrase(waiting),
                             waiting.size() == 1 ? " waits in it" : " wait in it");
  return verdict;
}

// Everyone joined and answers: name the slowest rank's last completed step.
Verdict all_waiting_verdict(const std::vector<RankTrace>& ranks, const Attendance& a, const Judged& judged) {
  Verdict verdict;
  verdict.kind = VerdictKind::kAllWaiting;
  verdict.details = a.details;
  const RankTrace* slowest = nullptr;
  for (const auto& rank : ranks)
    if (rank.present && rank.step >= 0 && (!slowest || rank.step < slowest->step)) slowest = &rank;
  verdict.headline = str_cat("all ranks are alive and waiting in the same ", judged.name, ": ", what_ran(judged.oldest));
  if (slowest) verdict.headline += str_cat("; the slowest rank's last completed step: rank ", slowest->rank, " at step ",
                                           slowest->step);
  return verdict;
}
}  // namespace

// The first verdict that applies, in this order: ranks ran different collectives at the
// judged one's number; ranks did not join it; ranks went silent inside it; all wait in it.
Verdict trace_verdict(const std::vector<RankTrace>& ranks) {
  if (ranks_present(ranks) == 0) return no_trace_verdict();
  const OldestInFlight oldest = oldest_in_flight(ranks);
  if (!oldest.record) return idle_verdict(ranks);
  const Attendance a = attendance(ranks, oldest.record->communicator, oldest.record->sequence);
  const Judged judged{*oldest.rank, *oldest.record,
                      str_cat("collective #", oldest.record->sequence, " on ", oldest.record->communicator)};
  if (a.by_fingerprint.size() > 1) return mismatch_verdict(a, judged);
  if (!a.missing.empty()) return missing_verdict(a, judged);
  const std::vector<int> silent = silent_ranks(ranks);
  if (!silent.empty()) return silent_verdict(a, judged, silent);
  return all_waiting_verdict(ranks, a, judged);
}

std::string collective_mismatch(const CollectiveRecord& mine, const std::string& me, const CollectiveRecord& theirs,
                                const std::string& them) {
  if (mine.communicator != theirs.communicator || mine.sequence != theirs.sequence) return "";
  if (mine.fingerprint == theirs.fingerprint) return "";
  return str_cat(them, " runs ", describe_collective(theirs), " where ", me, " runs ", describe_collective(mine));
}

}  // namespace mirrored::comm
