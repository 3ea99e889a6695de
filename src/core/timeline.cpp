#include "mirrored/core/timeline.h"

#include <atomic>
#include <sstream>

namespace mirrored {
namespace {
// Small stable thread ids (0 = the first thread that records: the main thread).
int thread_index() {
  static std::atomic<int> next{0};
  thread_local const int index = next++;
  return index;
}
}  // namespace

Timeline::Timeline()
    : steady_origin_(std::chrono::steady_clock::now()),
      wall_origin_us_(std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count()) {}

int64_t Timeline::now_us() const {
  return wall_origin_us_ +
         std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - steady_origin_)
             .count();
}

void Timeline::add(const std::string& name, const char* category, int64_t start_us, int64_t end_us) {
  if (!recording_) return;
  const int thread = thread_index();
  std::lock_guard lock(mutex_);
  events_.push_back({name, category, start_us, end_us, thread});
}

std::string Timeline::trace_events(int pid) const {
  std::lock_guard lock(mutex_);
  std::ostringstream out;
  for (size_t i = 0; i < events_.size(); ++i) {
    const Event& e = events_[i];
    if (i) out << ",\n";
    // Names are layer and bucket names built by the project: no characters to escape.
    out << R"({"name":")" << e.name << R"(","cat":")" << e.category << R"(","ph":"X","ts":)" << e.start_us
        << R"(,"dur":)" << (e.end_us - e.start_us) << R"(,"pid":)" << pid << R"(,"tid":)" << e.thread << "}";
  }
  return out.str();
}

Timeline::Span::Span(Timeline* timeline, const std::string& name, const char* category)
    : timeline_(timeline && timeline->recording() ? timeline : nullptr), category_(category) {
  if (!timeline_) return;  // the common case: no copy, no clock read
  name_ = name;
  start_ = timeline_->now_us();
}

Timeline::Span::~Span() {
  if (timeline_) timeline_->add(name_, category_, start_, timeline_->now_us());
}

}  // namespace mirrored
