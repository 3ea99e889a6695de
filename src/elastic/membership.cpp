#include "mirrored/elastic/membership.h"

#include <algorithm>

#include "mirrored/checkpoint/run_directory.h"
#include "mirrored/core/log.h"

namespace mirrored::elastic {

Membership membership_after(const std::vector<runtime::JobMember>& before, const runtime::ShrunkJob& shrunk) {
  Membership membership;
  membership.world_size = shrunk.size();
  const auto& survived = shrunk.previous_rank;
  for (int rank = 0; rank < static_cast<int>(before.size()); ++rank)
    if (std::find(survived.begin(), survived.end(), rank) == survived.end())
      membership.lost.push_back({rank, before[static_cast<size_t>(rank)].host});
  return membership;
}

std::vector<int> lost_ranks_to_end(const std::vector<runtime::JobMember>& before, const runtime::ShrunkJob& shrunk,
                                   const Membership& membership) {
  std::vector<int> mine;
  for (const LostRank& lost : membership.lost) {
    // The survivors keep their order: the first one on the lost rank's host is the lowest.
    const auto& survived = shrunk.previous_rank;
    const auto lowest_here = std::find_if(survived.begin(), survived.end(), [&](int previous) {
      return before.at(static_cast<size_t>(previous)).host == lost.host;
    });
    if (lowest_here != survived.end() && lowest_here - survived.begin() == shrunk.rank) mine.push_back(lost.rank);
  }
  return mine;
}

std::string describe_lost(const Membership& membership) {
  std::string text;
  for (const auto& lost : membership.lost)
    text += str_cat(text.empty() ? "" : ", ", "rank ", lost.rank, " (", lost.host, ")");
  return text.empty() ? "no rank" : text;
}

void MembershipReporter::on_step_end(train::TrainContext& ctx, const train::StepEnd&) {
  if (reported_) return;
  reported_ = true;
  const double seconds = since_failure_.seconds();
  std::vector<io::JsonRecord> lost;
  for (const auto& rank : recovery_.membership.lost)
    lost.push_back({{"rank", static_cast<int64_t>(rank.rank)}, {"host", rank.host}});
  ctx.run_dir.log_metrics({{"kind", std::string("membership")},
                           {"step", recovery_.step},
                           {"world_size", static_cast<int64_t>(recovery_.membership.world_size)},
                           {"lost", io::to_json_array(lost)},
                           {"recovery_s", seconds}});
  chief_info(str_cat("membership: ", recovery_.membership.world_size, " replica(s) after losing ",
                     describe_lost(recovery_.membership), "; first step after recovery done ",
                     fixed(seconds, 2), " s after the failure was detected"));
}

}  // namespace mirrored::elastic
