#pragma once
// Spans of time (data, forward, backward per layer, each bucket's all-reduce, optimizer)
// recorded from any thread and written as Chrome trace events (chrome://tracing, Perfetto).
// Timestamps are wall-clock microseconds, so the spans of ranks on one host line up.
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace mirrored {

class Timeline {
 public:
  Timeline();

  // Recording is off until switched on; spans added while off are dropped.
  void set_recording(bool on) { recording_ = on; }
  bool recording() const { return recording_; }

  int64_t now_us() const;
  // Thread-safe. `category` must be a string literal.
  void add(const std::string& name, const char* category, int64_t start_us, int64_t end_us);

  // The recorded spans as comma-separated trace event objects with pid = `pid`.
  std::string trace_events(int pid) const;

  // Records [construction, destruction) when the timeline is non-null and recording.
  class Span {
   public:
    Span(Timeline* timeline, const std::string& name, const char* category);
    ~Span();
    Span(const Span&) = delete;
    Span& operator=(const Span&) = delete;

   private:
    Timeline* timeline_;
    std::string name_;
    const char* category_;
    int64_t start_ = 0;
  };

 private:
  struct Event {
    std::string name;
    const char* category;
    int64_t start_us, end_us;
    int thread;
  };
  std::chrono::steady_clock::time_point steady_origin_;
  int64_t wall_origin_us_;
  bool recording_ = false;
  mutable std::mutex mutex_;
  std::vector<Event> events_;
};

}  // namespace mirrored
