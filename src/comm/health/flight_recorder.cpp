#include "mirrored/comm/health/flight_recorder.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>

#include "mirrored/core/error.h"
#include "mirrored/core/file_replacement.h"
#include "mirrored/core/host_memory.h"
#include "mirrored/core/fingerprint.h"
#include "mirrored/core/log.h"
#include "mirrored/core/strings.h"

namespace mirrored::comm {
namespace {
thread_local const char* t_site_what = "";
thread_local int64_t t_site_index = -1;

// Written from a signal handler: lock-free, so async-signal-safe.
std::atomic<int> g_dump_requested{0};
static_assert(std::atomic<int>::is_always_lock_free);

int64_t wall_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string site_text(const char* what, int64_t index) {
  if (what == nullptr || *what == '\0') return "";
  return index >= 0 ? str_cat(what, " ", index) : std::string(what);
}

// JSON string contents: names and literals here hold no control characters, but a host
// name or path could hold a quote.
std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}
}  // namespace

CallSite::CallSite(const char* what, int64_t index) : previous_what_(t_site_what), previous_index_(t_site_index) {
  t_site_what = what;
  t_site_index = index;
}

CallSite::~CallSite() {
  t_site_what = previous_what_;
  t_site_index = previous_index_;
}

const char* CallSite::current_what() { return t_site_what; }

uint64_t collective_fingerprint(const char* channel_name, const char* operation, size_t count, DataType type,
                                const char* site, int64_t site_index) {
  uint64_t hash = fingerprint_text(channel_name);
  hash = fingerprint_text("|", hash);
  hash = fingerprint_text(operation, hash);
  const uint64_t numbers[3] = {count, static_cast<uint64_t>(type), static_cast<uint64_t>(site_index)};
  hash = fingerprint_bytes(numbers, sizeof(numbers), hash);
  return fingerprint_text(site ? site : "", hash);
}

std::string describe_collective(const CollectiveRecord& record) {
  std::string text = str_cat(record.operation, " #", record.sequence, " on ", record.communicator, " (", record.count,
                             " ", record.type.empty() ? "elements" : record.type);
  if (!record.site.empty()) text += str_cat(", ", record.site);
  return text + ")";
}

const size_t FlightRecorder::kBytesPerCollective = sizeof(FlightRecorder::Entry);

FlightRecorder::FlightRecorder(size_t capacity) : capacity_(capacity) {
  if (capacity_ > static_cast<size_t>(kMaxRecordedCollectives))
    throw InputError(str_cat("a flight recorder of ", capacity_, " collectives would take ",
                             bytes_str(static_cast<double>(capacity_) * static_cast<double>(kBytesPerCollective)),
                             " per rank; at most ", kMaxRecordedCollectives, " (trace.collectives)"),
                     ExitCode::kUsage);
  ring_.resize(capacity_);
}

int FlightRecorder::add_channel(const char* name) {
  std::lock_guard lock(mutex_);
  channels_.push_back(Channel{name, 0});
  return static_cast<int>(channels_.size()) - 1;
}

FlightRecorder::Ticket FlightRecorder::start(const CollectiveCall& call) {
  const int64_t now = wall_us();
  const char* site = t_site_what;
  const int64_t site_index = t_site_index;
  const int channel_number = std::max(call.channel, 0);
  std::lock_guard lock(mutex_);
  // A collective on a communicator nobody named: a channel of its own, named by number.
  while (channels_.size() <= static_cast<size_t>(channel_number))
    channels_.push_back(Channel{str_cat("communicator ", channels_.size()), 0});
  Channel& channel = channels_[static_cast<size_t>(channel_number)];
  Ticket ticket;
  ticket.sequence = channel.next_sequence++;
  ticket.fingerprint =
      collective_fingerprint(channel.name.c_str(), call.operation, call.count, call.type, site, site_index);
  ticket.site = site;
  ticket.site_index = site_index;
  if (capacity_ > 0) {
    ticket.slot = serial_ % capacity_;
    ticket.serial = serial_;
    Entry& entry = ring_[ticket.slot];
    entry.serial = serial_;
    entry.sequence = ticket.sequence;
    entry.channel = channel_number;
    entry.operation = call.operation;
    entry.count = call.count;
    entry.type = call.type;
    entry.site = site;
    entry.site_index = site_index;
    entry.fingerprint = ticket.fingerprint;
    entry.start_us = now;
    entry.end_us = 0;
  }
  ++serial_;
  return ticket;
}

std::string FlightRecorder::channel_name(int channel) const {
  std::lock_guard lock(mutex_);
  if (channel < 0 || static_cast<size_t>(channel) >= channels_.size()) return str_cat("communicator ", channel);
  return channels_[static_cast<size_t>(channel)].name;
}

CollectiveRecord FlightRecorder::describe(const CollectiveCall& call, const Ticket& ticket) const {
  CollectiveRecord record;
  record.sequence = ticket.sequence;
  record.communicator = channel_name(call.channel);
  record.operation = call.operation;
  record.count = call.count;
  record.type = datatype_name(call.type);
  record.site = site_text(ticket.site, ticket.site_index);
  record.fingerprint = ticket.fingerprint;
  return record;
}

void FlightRecorder::finish(const Ticket& ticket) {
  if (ticket.slot == UINT64_MAX) return;
  const int64_t now = wall_us();
  std::lock_guard lock(mutex_);
  // A collective in flight longer than the ring's whole window may have been overwritten.
  if (ticket.slot < ring_.size() && ring_[ticket.slot].serial == ticket.serial) ring_[ticket.slot].end_us = now;
}

CollectiveRecord FlightRecorder::to_record(const Entry& entry) const {
  CollectiveRecord record;
  record.sequence = entry.sequence;
  record.communicator = channels_.at(static_cast<size_t>(entry.channel)).name;
  record.operation = entry.operation;
  record.count = entry.count;
  record.type = datatype_name(entry.type);
  record.site = site_text(entry.site, entry.site_index);
  record.fingerprint = entry.fingerprint;
  record.start_us = entry.start_us;
  record.end_us = entry.end_us;
  return record;
}

std::vector<CollectiveRecord> FlightRecorder::snapshot() const {
  std::lock_guard lock(mutex_);
  std::vector<CollectiveRecord> records;
  if (capacity_ == 0) return records;
  const uint64_t first = serial_ > capacity_ ? serial_ - capacity_ : 0;
  records.reserve(static_cast<size_t>(serial_ - first));
  for (uint64_t s = first; s < serial_; ++s) records.push_back(to_record(ring_[s % capacity_]));
  return records;
}

uint64_t FlightRecorder::recorded() const {
  std::lock_guard lock(mutex_);
  return serial_;
}

bool FlightRecorder::dump(const std::string& path, const std::string& header_fields) const {
  const std::vector<CollectiveRecord> records = snapshot();
  std::string text = str_cat("{\"kind\": \"trace\", ", header_fields, header_fields.empty() ? "" : ", ",
                             "\"ring\": ", capacity_, ", \"recorded\": ", recorded(), ", \"dumped_us\": ", wall_us(),
                             "}\n");
  for (const auto& r : records) {
    char fingerprint[24];
    std::snprintf(fingerprint, sizeof(fingerprint), "%016llx", static_cast<unsigned long long>(r.fingerprint));
    text += str_cat("{\"seq\": ", r.sequence, ", \"comm\": ", json_string(r.communicator),
                    ", \"op\": ", json_string(r.operation), ", \"count\": ", r.count,
                    ", \"dtype\": ", json_string(r.type), ", \"site\": ", json_string(r.site),
                    ", \"fingerprint\": \"", fingerprint, "\", \"start_us\": ", r.start_us,
                    ", \"end_us\": ", r.end_us, ", \"state\": \"", r.completed() ? "completed" : "started", "\"}\n");
  }
  try {
    replace_file(path, text);
  } catch (const std::exception& e) {
    rank_warning(str_cat("flight recorder: ", e.what()));
    return false;
  }
  return true;
}

void request_trace_dump() { g_dump_requested.store(1, std::memory_order_relaxed); }

bool take_trace_dump_request() { return g_dump_requested.exchange(0, std::memory_order_relaxed) != 0; }

}  // namespace mirrored::comm
