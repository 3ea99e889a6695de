#pragma once
// What the collective watchdog's threads say to each other (watchdog.cpp: heartbeats and
// deadlines; watchdog_trace.cpp: the flight recorder's dumps). Private to src/comm.
#include <chrono>

namespace mirrored::comm::watchdog_protocol {
using Clock = std::chrono::steady_clock;
constexpr auto kHeartbeatInterval = std::chrono::milliseconds(500);
constexpr auto kPollInterval = std::chrono::milliseconds(100);
// A peer is "silent" after missing this many heartbeats.
constexpr double kSilentAfterSeconds = 2.0;
// ... and "late" after missing two: not yet taken for stopped, but named in a warning that
// finds no other explanation (a rank stopped inside the stalled collective looks alive there).
constexpr double kLateAfterSeconds = 1.0;
// Non-chief ranks give rank 0 this long past the deadline to diagnose and abort the job,
// so the message that names the missing ranks is the one the user sees.
constexpr double kChiefGraceSeconds = 3.0;
constexpr int kTagToChief = 1, kTagFromChief = 2;
// A request to dump the flight recorder (to a rank, or to the chief to pass on), and its answer.
constexpr int kTagDumpRequest = 3, kTagDumpDone = 4;
// How long a failing rank waits for the others to write their dumps before it ends the job.
constexpr double kDumpWaitSeconds = 3.0;

inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace mirrored::comm::watchdog_protocol
