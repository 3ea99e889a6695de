#pragma once
// Time spent in each layer of a model and in the parts of a composite layer (a transformer
// block's layer norms, projections, attention core, ...), for `mirrored bench layers`, which
// times the same Model::forward and Model::backward that a training step calls. The model
// takes a LayerTimer; a layer that supports it takes a PartTimer and wraps each part in
// timed_part(). With no timer set (training, evaluation) that is one null test per layer
// or part, and nothing is timed.
#include <chrono>
#include <cstddef>

namespace mirrored::nn {

// Wall time in seconds (the default clock of both timers).
inline double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class LayerTimer {
 public:
  virtual ~LayerTimer() = default;
  // Layer `layer` (its index in the model) is about to run its forward, or its backward.
  virtual void begin(size_t layer, bool backward) = 0;
  // ... and it ran for `seconds`.
  virtual void end(size_t layer, bool backward, double seconds) = 0;
  // The clock a layer is timed on, in seconds: wall time unless the timer says otherwise
  // (`bench layers --clock cpu`: the process's CPU time, which other work on a shared host
  // does not inflate).
  virtual double now() const { return wall_seconds(); }
};

class PartTimer {
 public:
  virtual ~PartTimer() = default;
  // `part` names the piece of the layer that just ran for `seconds` (a static string).
  virtual void add(const char* part, double seconds) = 0;
  // The clock, as LayerTimer::now.
  virtual double now() const { return wall_seconds(); }
};

// Runs `run` and, when `timer` is set, reports its time on the timer's clock as `part`.
// Returns what `run` returns.
template <typename Run>
decltype(auto) timed_part(PartTimer* timer, const char* part, Run&& run) {
  if (!timer) return run();
  struct Report {
    PartTimer* timer;
    const char* part;
    double start = timer->now();
    ~Report() { timer->add(part, timer->now() - start); }
  } report{timer, part};
  return run();
}

}  // namespace mirrored::nn
