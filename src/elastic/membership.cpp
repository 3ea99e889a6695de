#include "mirrored/elastic/membership.h"

#include <algorithm>

#include "mirrored/checkpoint/run_directory.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"

namespace mirrored::elastic {

Membership membership_after(const std::vector<runtime::JobMember>& before, const std::vector<int>& training,
                            const runtime::ShrunkJob& shrunk) {
  const auto& survived = shrunk.previous_rank;  // by rank of the shrunk job: its job rank before
  const auto survivor = [&](int job_rank) {
    return static_cast<int>(std::find(survived.begin(), survived.end(), job_rank) - survived.begin());
  };
  const auto alive = [&](int job_rank) { return survivor(job_rank) < shrunk.size(); };
  const auto host_of = [&](int job_rank) { return before.at(static_cast<size_t>(job_rank)).host; };
  // Spares, lowest job rank first: the order in which they are called in.
  std::vector<int> spares;
  Membership membership;
  for (int rank = 0; rank < static_cast<int>(before.size()); ++rank) {
    if (std::find(training.begin(), training.end(), rank) != training.end()) continue;
    if (alive(rank))
      spares.push_back(rank);
    else
      membership.lost_spares.push_back({rank, host_of(rank), rank});
  }
  size_t next_spare = 0;
  for (int place = 0; place < static_cast<int>(training.size()); ++place) {
    const int job_rank = training[static_cast<size_t>(place)];
    if (alive(job_rank)) {
      membership.world.push_back(survivor(job_rank));
    } else if (next_spare < spares.size()) {
      const int spare = spares[next_spare++];
      membership.replaced.push_back({place, host_of(job_rank), host_of(spare), job_rank, spare});
      membership.world.push_back(survivor(spare));
    } else {
      membership.lost.push_back({place, host_of(job_rank), job_rank});
    }
  }
  membership.world_size = static_cast<int>(membership.world.size());
  membership.spares_left = static_cast<int>(spares.size() - next_spare);
  return membership;
}

runtime::ShrunkJob shrink_of(const std::vector<runtime::JobMember>& before, const std::vector<runtime::JobMember>& after,
                             int rank) {
  runtime::ShrunkJob shrunk;
  shrunk.size_before = static_cast<int>(before.size());
  shrunk.rank = rank;
  for (const auto& member : after) {
    const auto found = std::find_if(before.begin(), before.end(), [&](const runtime::JobMember& earlier) {
      return earlier.first_world_rank == member.first_world_rank;
    });
    MIRRORED_CHECK(found != before.end(), "a survivor, first-world rank ", member.first_world_rank,
                   ", was not in the job before");
    shrunk.previous_rank.push_back(static_cast<int>(found - before.begin()));
  }
  return shrunk;
}

Membership membership_after(const std::vector<runtime::JobMember>& before, const runtime::ShrunkJob& shrunk) {
  std::vector<int> training(before.size());
  for (size_t rank = 0; rank < training.size(); ++rank) training[rank] = static_cast<int>(rank);
  return membership_after(before, training, shrunk);
}

std::vector<int> lost_ranks_to_end(const std::vector<runtime::JobMember>& before, const runtime::ShrunkJob& shrunk,
                                   const Membership& membership) {
  std::vector<LostRank> every = membership.lost;
  for (const Replacement& replaced : membership.replaced)
    every.push_back({replaced.rank, replaced.host, replaced.job_rank});
  every.insert(every.end(), membership.lost_spares.begin(), membership.lost_spares.end());
  std::vector<int> mine;
  for (const LostRank& lost : every) {
    // The survivors keep their order: the first one on the lost rank's host is the lowest.
    const auto& survived = shrunk.previous_rank;
    const auto lowest_here = std::find_if(survived.begin(), survived.end(), [&](int previous) {
      return before.at(static_cast<size_t>(previous)).host == lost.host;
    });
    if (lowest_here != survived.end() && lowest_here - survived.begin() == shrunk.rank) mine.push_back(lost.job_rank);
  }
  return mine;
}

std::string describe_lost(const Membership& membership) {
  std::string text;
  for (const auto& lost : membership.lost)
    text += str_cat(text.empty() ? "" : ", ", "rank ", lost.rank, " (", lost.host, ")");
  return text.empty() ? "no rank" : text;
}

std::string describe_change(const Membership& membership) {
  if (membership.replaced.empty() && membership.lost_spares.empty()) return describe_lost(membership);
  std::string text;
  const auto add = [&](const std::string& part) { text += (text.empty() ? "" : ", ") + part; };
  for (const auto& replaced : membership.replaced)
    add(str_cat("rank ", replaced.rank, " (", replaced.host, ") replaced by a spare on ", replaced.by_host));
  if (!membership.lost.empty()) add(describe_lost(membership));
  for (const auto& spare : membership.lost_spares) add(str_cat("spare ", spare.rank, " (", spare.host, ") lost"));
  return text;
}

void MembershipReporter::on_step_end(train::TrainContext& ctx, const train::StepEnd&) {
  report(ctx, "first step after recovery done");
}

void MembershipReporter::on_train_end(train::TrainContext& ctx, const train::TrainSummary&) {
  report(ctx, "no step was left: the run ended");
}

void MembershipReporter::report(train::TrainContext& ctx, const char* until) {
  if (reported_) return;
  reported_ = true;
  const double seconds = since_failure_.seconds();
  const Membership& membership = recovery_.membership;
  const auto ranks = [](const std::vector<LostRank>& from) {
    std::vector<io::JsonRecord> records;
    for (const auto& rank : from) records.push_back({{"rank", static_cast<int64_t>(rank.rank)}, {"host", rank.host}});
    return io::to_json_array(records);
  };
  io::JsonRecord record = {{"kind", std::string("membership")},
                           {"step", recovery_.step},
                           {"world_size", static_cast<int64_t>(membership.world_size)},
                           {"lost", ranks(membership.lost)}};
  const bool spares = membership.with_spares;
  if (spares) {
    std::vector<io::JsonRecord> replaced;
    for (const auto& r : membership.replaced)
      replaced.push_back({{"rank", static_cast<int64_t>(r.rank)}, {"host", r.host}, {"by_host", r.by_host}});
    record.emplace_back("replaced", io::to_json_array(replaced));
    record.emplace_back("spares_lost", ranks(membership.lost_spares));
    record.emplace_back("spares", static_cast<int64_t>(membership.spares_left));
  }
  record.emplace_back("recovery_s", seconds);
  ctx.run_dir.log_metrics(record);
  // TensorBoard shows a shrink as train/world_size; a replacement leaves that as it was.
  ctx.pending_scalars.emplace_back("membership/recovery_s", static_cast<float>(seconds));
  if (spares) {
    ctx.pending_scalars.emplace_back("membership/replaced", static_cast<float>(membership.replaced.size()));
    ctx.pending_scalars.emplace_back("membership/spares", static_cast<float>(membership.spares_left));
  }
  chief_info(str_cat("membership: ", membership.world_size, " replica(s) after ",
                     spares ? describe_change(membership) : "losing " + describe_lost(membership),
                     "; ", until, " ", fixed(seconds, 2), " s after the failure was detected"));
}

}  // namespace mirrored::elastic
