#pragma once
// Straggler scores (NVIDIA's straggler detector, scored against the median rank): every
// log point, each rank's compute time per phase of the step (data, forward, backward,
// optimizer; the all-reduce phase is left out, since there a fast rank waits for a slow
// one) is compared with the other ranks'. A rank's score in a phase is
//
//     (median + floor) / (its time + floor)
//
// over the ranks' times per step: 1 for a typical rank, 0.5 for one taking twice the
// median. The median of an even count is the lower middle value, so with two ranks the
// faster one is the reference and a rank twice as slow scores 0.5, not 0.67. `floor` is 5%
// of the median rank's whole compute time per step, so phases that take microseconds (the
// data phase of an in-memory set) do not turn timer noise into scores.
//
// A rank whose lowest phase score stays below `threshold` for `window` log points in a row
// is a straggler (StragglerTracker). Pure functions: the Trainer gathers the times.
#include <array>
#include <cstdint>
#include <vector>

namespace mirrored::train {

inline constexpr int kScoredPhases = 4;
using PhaseSeconds = std::array<double, kScoredPhases>;  // data, forward, backward, optimizer
const char* scored_phase_name(int phase);               // "data", "forward", "backward", "optimizer"

// seconds[r]: rank r's compute time per step in each phase. Returns scores[r][phase].
std::vector<PhaseSeconds> straggler_scores(const std::vector<PhaseSeconds>& seconds);

// A rank's lowest phase score, and that phase.
struct RankScore {
  double score = 1.0;
  int phase = 0;
};
RankScore lowest_score(const PhaseSeconds& scores);

struct StragglerFlag {
  int rank = 0;
  int phase = 0;       // its lowest-scoring phase at this log point
  double score = 1.0;
  int64_t points = 0;  // log points in a row below the threshold, this one included
};

class StragglerTracker {
 public:
  // The first `warmup` log points are scored but not counted: start-up (first touch of
  // memory, caches, the launcher's own work) slows ranks unevenly for a moment.
  StragglerTracker(double threshold, int64_t window, int64_t warmup = 0);
  // One log point's scores (straggler_scores): the ranks below the threshold for at least
  // `window` points in a row, this one included. A rank that scores at or above the
  // threshold starts counting again.
  std::vector<StragglerFlag> update(const std::vector<PhaseSeconds>& scores);

 private:
  double threshold_;
  int64_t window_;
  int64_t warmup_;
  int64_t points_ = 0;
  std::vector<int64_t> below_;  // per rank: consecutive points below the threshold
};

}  // namespace mirrored::train
