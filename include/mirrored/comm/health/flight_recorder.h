#pragma once
// The collective flight recorder (PyTorch's NCCL flight recorder, for every MPI
// collective): each rank keeps its last `capacity` collectives in a ring, with the
// sequence number on their communicator, the operation, element count and type, the call
// site (gradient bucket, parameter all-gather, a loss reduction...) and start/end times.
// When a job hangs, the rings say which rank did not join which collective, or ran a
// different one: they are written to <out>/trace/rank-<r>.jsonl on a collective timeout, a
// fatal error or SIGUSR2, and `mirrored trace RUN_DIR` turns them into one verdict
// (collective_verdict.h).
//
// A collective's fingerprint hashes what must be the same on every rank for the call to
// match: communicator, operation, count, type and call site. Two ranks with the same
// sequence number on one communicator but different fingerprints ran different collectives.
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "mirrored/comm/communicator.h"

namespace mirrored::comm {

// Where a collective is issued from, for its record and fingerprint: set for the calls the
// current thread starts while it lives (RAII, nests; the previous site comes back).
// `what` must be a string literal (it is kept by pointer).
class CallSite {
 public:
  explicit CallSite(const char* what, int64_t index = -1);
  ~CallSite();
  CallSite(const CallSite&) = delete;
  CallSite& operator=(const CallSite&) = delete;
  static const char* current_what();  // "" when no site is set

 private:
  const char* previous_what_;
  int64_t previous_index_;
};

// One collective call as a rank issues it. `operation` must outlive the recorder (a
// literal); `channel` is the communicator's number in creation order (the same on every
// rank, since communicators are created collectively).
struct CollectiveCall {
  const char* operation = "";
  size_t count = 0;
  DataType type = DataType::kU8;
  int channel = 0;
};

// A collective as the ring keeps it, and as a dump is read back (strings, so a reader
// needs no table).
struct CollectiveRecord {
  uint64_t sequence = 0;       // its number on its communicator, from 0
  std::string communicator;    // the channel's name ("world", "gradients", ...)
  std::string operation;       // "allreduce", "broadcast", "all-gather", ...
  uint64_t count = 0;          // elements, never bytes
  std::string type;            // datatype_name()
  std::string site;            // "gradient bucket 3", "" when unknown
  uint64_t fingerprint = 0;
  int64_t start_us = 0;        // wall clock, microseconds since the epoch
  int64_t end_us = 0;          // 0 while in flight
  bool completed() const { return end_us != 0; }
};

// The fingerprint of a call on a channel with a call site: what must match across ranks.
uint64_t collective_fingerprint(const char* channel_name, const char* operation, size_t count, DataType type,
                                const char* site, int64_t site_index);

// "allreduce #12 on gradients (4096 f32, gradient bucket 2)": how messages name a collective.
std::string describe_collective(const CollectiveRecord& record);

// The most collectives a ring may keep: 84 MiB per rank, hours of a job's collectives at
// the default's rate (a training step issues a few dozen).
inline constexpr int64_t kMaxRecordedCollectives = 1'000'000;

class FlightRecorder {
 public:
  // What one recorded collective takes in the ring (a dump adds its text, briefly).
  static const size_t kBytesPerCollective;

  // capacity 0: nothing is recorded (the ring is off); sequence numbers are still kept.
  // More than kMaxRecordedCollectives: InputError (kUsage) saying the memory it would take.
  explicit FlightRecorder(size_t capacity = 2000);
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  size_t capacity() const { return capacity_; }
  // A new channel (communicator), named for messages; returns its number.
  int add_channel(const char* name);

  // The collective starts now: its ticket for finish(), with what the heartbeat carries.
  struct Ticket {
    uint64_t slot = UINT64_MAX;  // position in the ring; UINT64_MAX when not recorded
    uint64_t serial = 0;         // the record's serial number, to detect an overwritten slot
    uint64_t sequence = 0;
    uint64_t fingerprint = 0;
    const char* site = "";
    int64_t site_index = -1;
  };
  Ticket start(const CollectiveCall& call);
  void finish(const Ticket& ticket);
  std::string channel_name(int channel) const;
  // The record of a collective in flight, from its call and ticket (for messages).
  CollectiveRecord describe(const CollectiveCall& call, const Ticket& ticket) const;

  // The ring, oldest first.
  std::vector<CollectiveRecord> snapshot() const;
  uint64_t recorded() const;  // collectives recorded since start (more than the ring holds)

  // Writes the ring as JSON lines to `path` (a header line, then one line per collective,
  // oldest first), through a temporary file renamed into place. `header_fields` are JSON
  // members ("\"key\": value" joined by ", ") added to the header. Returns false (and warns)
  // when the file cannot be written; never throws, since it runs while a job is failing.
  bool dump(const std::string& path, const std::string& header_fields) const;

 private:
  struct Channel {
    std::string name;
    uint64_t next_sequence = 0;
  };
  // What the ring holds: pointers to literals and numbers, so recording allocates nothing.
  struct Entry {
    uint64_t serial = 0;
    uint64_t sequence = 0;
    int channel = 0;
    const char* operation = "";
    size_t count = 0;
    DataType type = DataType::kU8;
    const char* site = "";
    int64_t site_index = -1;
    uint64_t fingerprint = 0;
    int64_t start_us = 0, end_us = 0;
  };
  CollectiveRecord to_record(const Entry& entry) const;

  mutable std::mutex mutex_;
  size_t capacity_;
  std::vector<Entry> ring_;
  std::vector<Channel> channels_;
  uint64_t serial_ = 0;  // records ever started; the next one goes to slot serial_ % capacity_
};

// Async-signal-safe: asks for a dump of the rings (the watchdog's thread writes them within
// a poll interval). The SIGUSR2 handler calls it.
void request_trace_dump();
// True once after each request (the watchdog thread's check).
bool take_trace_dump_request();

}  // namespace mirrored::comm
