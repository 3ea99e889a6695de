#pragma once
// Time spent in the parts of a composite layer (a transformer block's layer norms,
// projections, attention core, ...), for `mirrored bench layers`. A layer that supports it
// takes a PartTimer and wraps each part in timed_part(); with no timer set (training,
// evaluation) that is one null test per part, and nothing is timed.
#include <chrono>

namespace mirrored::nn {

class PartTimer {
 public:
  virtual ~PartTimer() = default;
  // `part` names the piece of the layer that just ran for `seconds` (a static string).
  virtual void add(const char* part, double seconds) = 0;
};

// Runs `run` and, when `timer` is set, reports its wall time as `part`. Returns what `run`
// returns.
template <typename Run>
decltype(auto) timed_part(PartTimer* timer, const char* part, Run&& run) {
  if (!timer) return run();
  struct Report {
    PartTimer* timer;
    const char* part;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    ~Report() { timer->add(part, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()); }
  } report{timer, part};
  return run();
}

}  // namespace mirrored::nn
