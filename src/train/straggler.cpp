#include "mirrored/train/straggler.h"

#include <algorithm>

#include "mirrored/core/error.h"

namespace mirrored::train {
namespace {
// The lower middle value: with two ranks, the faster one.
double lower_median(std::vector<double> values) {
  const size_t middle = (values.size() - 1) / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(middle), values.end());
  return values[middle];
}

// Of the median rank's whole compute time: phases shorter than this score near 1.
constexpr double kFloorFraction = 0.10;
}  // namespace

const char* scored_phase_name(int phase) {
  constexpr const char* kNames[kScoredPhases] = {"data", "forward", "backward", "optimizer"};
  return phase >= 0 && phase < kScoredPhases ? kNames[phase] : "?";
}

std::vector<PhaseSeconds> straggler_scores(const std::vector<PhaseSeconds>& seconds) {
  std::vector<PhaseSeconds> scores(seconds.size());
  if (seconds.empty()) return scores;
  std::vector<double> totals;
  for (const auto& rank : seconds) {
    double total = 0.0;
    for (const double s : rank) total += std::max(s, 0.0);
    totals.push_back(total);
  }
  const double floor = std::max(kFloorFraction * lower_median(totals), 1e-9);
  for (int phase = 0; phase < kScoredPhases; ++phase) {
    std::vector<double> times;
    for (const auto& rank : seconds) times.push_back(std::max(rank[phase], 0.0));
    const double median = lower_median(times);
    for (size_t r = 0; r < seconds.size(); ++r) scores[r][phase] = (median + floor) / (times[r] + floor);
  }
  return scores;
}

RankScore lowest_score(const PhaseSeconds& scores) {
  RankScore lowest{scores[0], 0};
  for (int phase = 1; phase < kScoredPhases; ++phase)
    if (scores[phase] < lowest.score) lowest = {scores[phase], phase};
  return lowest;
}

StragglerTracker::StragglerTracker(double threshold, int64_t window, int64_t warmup)
    : threshold_(threshold), window_(window), warmup_(warmup) {
  MIRRORED_CHECK(threshold > 0 && window >= 1, "straggler threshold ", threshold, " and window ", window);
}

std::vector<StragglerFlag> StragglerTracker::update(const std::vector<PhaseSeconds>& scores) {
  below_.resize(scores.size(), 0);
  std::vector<StragglerFlag> flags;
  if (points_++ < warmup_) return flags;
  for (size_t r = 0; r < scores.size(); ++r) {
    const RankScore lowest = lowest_score(scores[r]);
    below_[r] = lowest.score < threshold_ ? below_[r] + 1 : 0;
    if (below_[r] >= window_) flags.push_back({static_cast<int>(r), lowest.phase, lowest.score, below_[r]});
  }
  return flags;
}

}  // namespace mirrored::train
