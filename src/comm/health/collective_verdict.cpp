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
}  // namespace

Verdict trace_verdict(const std::vector<RankTrace>& ranks) {
  Verdict verdict;
  const RankTrace* oldest_rank = nullptr;
  const CollectiveRecord* oldest = nullptr;
  int present = 0;
  for (const auto& rank : ranks) {
    if (!rank.present) continue;
    ++present;
    for (const auto& r : rank.records)
      if (!r.completed() && (!oldest || r.start_us < oldest->start_us)) {
        oldest = &r;
        oldest_rank = &rank;
      }
  }
  if (present == 0) {
    verdict.headline = "no trace: no rank left a dump (trace/rank-<r>.jsonl)";
    return verdict;
  }
  std::vector<int> absent;
  for (const auto& rank : ranks)
    if (!rank.present) absent.push_back(rank.rank);

  if (!oldest) {
    verdict.kind = VerdictKind::kIdle;
    verdict.headline = "no collective in flight: every collective the ranks recorded completed";
    if (!absent.empty()) verdict.headline += str_cat("; no dump from ranks ", rank_set(absent));
    for (const auto& rank : ranks)
      if (rank.present)
        verdict.details.push_back(str_cat(rank_name(rank), ": ", rank.records.size(), " collectives recorded",
                                          rank.records.empty() ? "" : ", last " + describe_collective(rank.records.back()),
                                          rank.step >= 0 ? str_cat(", step ", rank.step) : ""));
    return verdict;
  }

  // Every rank's part in that collective: joined (with what it ran), or not yet there.
  const std::string& communicator = oldest->communicator;
  const uint64_t sequence = oldest->sequence;
  std::map<uint64_t, std::vector<const RankTrace*>> by_fingerprint;
  std::vector<int> missing;
  std::vector<int> joined;
  for (const auto& rank : ranks) {
    if (!rank.present) {
      missing.push_back(rank.rank);
      verdict.details.push_back(str_cat(rank_name(rank), ": no dump (stopped, dead or unreachable)"));
      continue;
    }
    if (const CollectiveRecord* r = find(rank, communicator, sequence)) {
      by_fingerprint[r->fingerprint].push_back(&rank);
      joined.push_back(rank.rank);
      verdict.details.push_back(str_cat(rank_name(rank), ": ", r->completed() ? "completed " : "waiting in ",
                                        describe_collective(*r), rank.step >= 0 ? str_cat(", step ", rank.step) : ""));
    } else {
      missing.push_back(rank.rank);
      const int64_t last = last_sequence(rank, communicator);
      verdict.details.push_back(str_cat(rank_name(rank), ": not there; its last collective on ", communicator, " was ",
                                        last < 0 ? std::string("none recorded") : str_cat("#", last),
                                        rank.step >= 0 ? str_cat(", step ", rank.step) : ""));
    }
  }
  const std::string collective = str_cat("collective #", sequence, " on ", communicator);

  if (by_fingerprint.size() > 1) {
    verdict.kind = VerdictKind::kMismatch;
    // Name the ranks that differ from the group holding the rank with the oldest call.
    const uint64_t reference = find(*oldest_rank, communicator, sequence)->fingerprint;
    // Groups in the order of their lowest rank, so rank 0's call comes first.
    std::vector<std::pair<uint64_t, std::vector<const RankTrace*>>> ordered(by_fingerprint.begin(),
                                                                            by_fingerprint.end());
    std::sort(ordered.begin(), ordered.end(),
              [](const auto& a, const auto& b) { return a.second.front()->rank < b.second.front()->rank; });
    std::vector<std::string> groups;
    for (const auto& [fingerprint, group] : ordered) {
      std::vector<int> members;
      for (const RankTrace* rank : group) {
        members.push_back(rank->rank);
        if (fingerprint != reference) verdict.ranks.push_back(rank->rank);
      }
      groups.push_back(str_cat(ranks_phrase(members), " ran ", what_ran(*find(*group.front(), communicator, sequence))));
    }
    verdict.headline = str_cat("mismatch at ", collective, ": ", join(groups, "; "),
                               " (every rank must issue the same collectives in the same order)");
    return verdict;
  }
  const std::string what = what_ran(*oldest);
  if (!missing.empty()) {
    verdict.kind = VerdictKind::kMissing;
    verdict.ranks = missing;
    verdict.headline = str_cat(ranks_phrase(missing), " did not join ", collective, ": ", what, "; ",
                               ranks_phrase(joined), " joined it");
    return verdict;
  }
  // Everyone joined. A rank that the watchdogs stopped hearing from is stuck inside it.
  std::vector<int> silent, waiting;
  for (const auto& rank : ranks)
    for (const int r : rank.silent)
      if (std::find(silent.begin(), silent.end(), r) == silent.end()) silent.push_back(r);
  std::sort(silent.begin(), silent.end());
  if (!silent.empty()) {
    for (const int r : joined)
      if (!std::binary_search(silent.begin(), silent.end(), r)) waiting.push_back(r);
    verdict.kind = VerdictKind::kSilent;
    verdict.ranks = silent;
    verdict.headline = str_cat(ranks_phrase(silent), " stopped responding inside ", collective, ": ", what, "; ",
                               ranks_phrase(waiting), waiting.size() == 1 ? " waits in it" : " wait in it");
    return verdict;
  }
  verdict.kind = VerdictKind::kAllWaiting;
  const RankTrace* slowest = nullptr;
  for (const auto& rank : ranks)
    if (rank.present && rank.step >= 0 && (!slowest || rank.step < slowest->step)) slowest = &rank;
  verdict.headline = str_cat("all ranks are alive and waiting in the same ", collective, ": ", what);
  if (slowest) verdict.headline += str_cat("; the slowest rank's last completed step: rank ", slowest->rank, " at step ",
                                           slowest->step);
  return verdict;
}

std::string collective_mismatch(const CollectiveRecord& mine, const std::string& me, const CollectiveRecord& theirs,
                                const std::string& them) {
  if (mine.communicator != theirs.communicator || mine.sequence != theirs.sequence) return "";
  if (mine.fingerprint == theirs.fingerprint) return "";
  return str_cat(them, " runs ", describe_collective(theirs), " where ", me, " runs ", describe_collective(mine));
}

}  // namespace mirrored::comm
