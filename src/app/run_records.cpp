#include "mirrored/app/run_records.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "mirrored/core/error.h"
#include "mirrored/core/strings.h"
#include "mirrored/io/jsonl_reader.h"

namespace mirrored::app {
namespace {

// Closes a descriptor on every way out.
struct Descriptor {
  int fd = -1;
  explicit Descriptor(int f) : fd(f) {}
  ~Descriptor() {
    if (fd >= 0) ::close(fd);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
};

double seconds_of(const struct timespec& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9; }

struct FileText {
  std::string text;
  double changed_s = 0;  // the file's last modification (Unix seconds)
};

// `name` in the run directory `dir`: a regular file of at most `limit` bytes, opened without
// following a symlink (O_NONBLOCK: a FIFO planted under the name cannot block the open).
// Nothing when it does not exist.
std::optional<FileText> read_bounded(int dir, const std::string& run_dir, const char* name, uint64_t limit) {
  const std::string path = str_cat(run_dir, "/", name);
  Descriptor file(::openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (file.fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    const int error = errno;
    throw InputError(str_cat("report: cannot read '", path, "': ",
                             error == ELOOP ? "it is a symbolic link (not followed)" : std::strerror(error)));
  }
  struct stat info {};
  if (::fstat(file.fd, &info) != 0 || !S_ISREG(info.st_mode))
    throw InputError(str_cat("report: '", path, "' is not a regular file"));
  if (static_cast<uint64_t>(info.st_size) > limit)
    throw InputError(str_cat("report: '", path, "' has ", info.st_size, " bytes, more than the ", limit,
                             " a run writes there; not read"));
  FileText out;
  out.changed_s = seconds_of(info.st_mtim);
  out.text.resize(static_cast<size_t>(info.st_size));
  size_t got = 0;
  while (got < out.text.size()) {
    const ssize_t n = ::read(file.fd, out.text.data() + got, out.text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw InputError(str_cat("report: cannot read '", path, "': ", std::strerror(errno)));
    if (n == 0) break;  // cut back while we read: what is there
    got += static_cast<size_t>(n);
  }
  out.text.resize(got);
  return out;
}

// The earliest creation time in the TensorBoard event files' names
// (events.out.tfevents.<unix seconds>.<host>), or nothing.
std::optional<double> first_event_file_time(int dir) {
  const int fd = ::openat(dir, "tensorboard", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  DIR* listing = ::fdopendir(fd);
  if (listing == nullptr) {
    ::close(fd);
    return std::nullopt;
  }
  std::optional<double> first;
  constexpr std::string_view kPrefix = "events.out.tfevents.";
  while (const dirent* entry = ::readdir(listing)) {
    const std::string_view name = entry->d_name;
    if (name.substr(0, kPrefix.size()) != kPrefix) continue;
    const std::string_view rest = name.substr(kPrefix.size());
    const size_t digits = rest.find_first_not_of("0123456789");
    if (digits == 0 || digits == std::string_view::npos || digits > 12) continue;
    const double time = std::stod(std::string(rest.substr(0, digits)));
    if (!first || time < *first) first = time;
  }
  ::closedir(listing);
  return first;
}

std::optional<double> optional_number(const io::JsonObject& object, const std::string& key) {
  const auto it = object.find(key);
  if (it == object.end()) return std::nullopt;
  if (const auto* i = std::get_if<int64_t>(&it->second)) return static_cast<double>(*i);
  if (const auto* d = std::get_if<double>(&it->second)) return *d;
  return std::nullopt;
}

// "rank 1 (node-b)" for each of a list of ranks ({"rank", "host"[, "by_host"]}).
std::string describe_ranks(const io::JsonObject& record, const std::string& key, const std::string& origin) {
  const auto it = record.find(key);
  if (it == record.end()) return "";
  if (const auto* numbers = std::get_if<std::vector<double>>(&it->second); numbers && numbers->empty()) return "";
  const auto* text = std::get_if<io::JsonText>(&it->second);
  if (text == nullptr) throw InputError(str_cat(origin, ": field '", key, "' must be an array of {\"rank\", \"host\"}"));
  std::vector<std::string> parts;
  for (const io::JsonObject& rank : io::parse_json_objects(*text, origin)) {
    std::string part = str_cat("rank ", io::json_integer(rank, "rank", origin, 0, INT32_MAX));
    if (const auto host = io::json_optional_string(rank, "host")) part += str_cat(" (", *host, ")");
    if (const auto by = io::json_optional_string(rank, "by_host")) part += str_cat(" by ", *by);
    parts.push_back(part);
  }
  return join(parts, ", ");
}

bool has_entries(const io::JsonObject& record, const std::string& key) {
  const auto it = record.find(key);
  if (it == record.end()) return false;
  // An empty list ([] reads as an empty array of numbers) is no entry; anything else is.
  const auto* numbers = std::get_if<std::vector<double>>(&it->second);
  return numbers == nullptr || !numbers->empty();
}

MembershipEvent membership_event(const io::JsonObject& record, const std::string& origin, int64_t world) {
  MembershipEvent event;
  event.step = io::json_integer(record, "step", origin, 0, INT64_MAX);
  event.world_before = optional_number(record, "from") ? io::json_integer(record, "from", origin, 1, INT32_MAX) : world;
  event.world_after = record.count("world_size")
                          ? io::json_integer(record, "world_size", origin, 1, INT32_MAX)
                          : (record.count("to") ? io::json_integer(record, "to", origin, 1, INT32_MAX) : world);
  event.recovery_s = optional_number(record, "recovery_s");
  if (io::json_optional_string(record, "kind") == "grown" || has_entries(record, "grown")) {
    event.kind = "grown";
  } else if (has_entries(record, "replaced")) {
    event.kind = "replaced";
    event.detail = describe_ranks(record, "replaced", origin);
  } else {
    event.kind = "shrink";
  }
  const std::string lost = describe_ranks(record, "lost", origin);
  if (!lost.empty()) event.detail = event.detail.empty() ? "lost " + lost : event.detail + "; lost " + lost;
  return event;
}

// One complete record into `records`; `world` follows the world size through the file.
void add_record(const io::JsonObject& record, const std::string& origin, RunRecords& records, int64_t& world) {
  const auto kind = io::json_optional_string(record, "kind");
  if (kind == "train") {
    TrainRecord train;
    train.step = io::json_integer(record, "step", origin, 0, INT64_MAX);
    train.loss = io::json_number(record, "loss", origin);
    train.samples_per_sec = io::json_number(record, "samples_per_sec", origin);
    train.tokens_per_sec = optional_number(record, "tokens_per_sec");
    train.world_size = io::json_integer(record, "world_size", origin, 1, INT32_MAX);
    world = train.world_size;
    records.train.push_back(train);
  } else if (kind == "eval" && record.count("step")) {  // `mirrored eval --json`'s records have no step
    EvalRecord eval;
    eval.step = io::json_integer(record, "step", origin, 0, INT64_MAX);
    const bool language_model = record.count("val_loss") > 0;
    eval.loss = io::json_number(record, language_model ? "val_loss" : "test_loss", origin);
    eval.accuracy = optional_number(record, "test_accuracy");
    eval.perplexity = optional_number(record, "perplexity");
    records.eval.push_back(eval);
  } else if (kind == "membership" || kind == "grown") {
    records.membership.push_back(membership_event(record, origin, world));
    world = records.membership.back().world_after;
  } else if (kind == "straggler") {
    StragglerRecord straggler;
    straggler.step = io::json_integer(record, "step", origin, 0, INT64_MAX);
    straggler.rank = io::json_integer(record, "rank", origin, 0, INT32_MAX);
    straggler.host = io::json_optional_string(record, "host").value_or("");
    straggler.phase = io::json_optional_string(record, "phase").value_or("");
    straggler.score = io::json_number(record, "score", origin);
    records.stragglers.push_back(straggler);
  }
}

void parse_ranks(const std::string& text, const std::string& path, RunRecords& records) {
  const std::vector<std::string> lines = split(text, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    if (trim(lines[i]).empty()) continue;
    const std::string origin = str_cat(path, ":", i + 1);
    const io::JsonObject rank = io::parse_json_object(lines[i], origin);
    records.ranks.push_back({io::json_integer(rank, "rank", origin, 0, INT32_MAX), io::json_string(rank, "host", origin),
                             io::json_integer(rank, "pid", origin, 0, INT32_MAX)});
  }
}

}  // namespace

const std::string* RunRecords::config_value(const std::string& key) const {
  for (const auto& [name, value] : config)
    if (name == key) return &value;
  return nullptr;
}

void parse_metrics(const std::string& text, const std::string& origin, RunRecords& records) {
  int64_t world = 0;
  size_t begin = 0;
  for (int64_t number = 1; begin < text.size(); ++number) {
    const size_t end = text.find('\n', begin);
    const bool finished = end != std::string::npos;
    const std::string line = text.substr(begin, finished ? end - begin : std::string::npos);
    begin = finished ? end + 1 : text.size();
    if (trim(line).empty()) continue;
    const std::string where = str_cat(origin, ":", number);
    if (!finished) {
      // The last line without its newline: a record still being written. Read it when it is
      // whole already; otherwise skip it and say so.
      try {
        add_record(io::parse_json_object(line, where), where, records, world);
      } catch (const InputError&) {
        ++records.unfinished_lines;
      }
      continue;
    }
    add_record(io::parse_json_object(line, where), where, records, world);
  }
}

std::vector<std::pair<std::string, std::string>> parse_config_text(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::string section;
  for (const std::string& raw : split(text, '\n')) {
    const std::string line = trim(raw);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      section = trim(line.substr(1, line.size() - 2));
      continue;
    }
    const size_t equals = line.find('=');
    if (equals == std::string::npos) continue;
    const std::string key = trim(line.substr(0, equals));
    out.emplace_back(section.empty() ? key : section + "." + key, trim(line.substr(equals + 1)));
  }
  return out;
}

RunRecords read_run_records(const std::string& run_dir) {
  Descriptor dir(::open(run_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dir.fd < 0) {
    const int error = errno;
    struct stat link {};
    const bool symlink = ::lstat(run_dir.c_str(), &link) == 0 && S_ISLNK(link.st_mode);
    throw InputError(str_cat("report: cannot open the run directory '", run_dir, "': ",
                             symlink ? "it is a symbolic link (not followed; pass the directory it names)"
                                     : std::strerror(error)),
                     ExitCode::kUsage);
  }
  RunRecords records;
  records.run_dir = run_dir;
  const std::optional<FileText> metrics = read_bounded(dir.fd, run_dir, "metrics.jsonl", kMaxMetricsBytes);
  if (!metrics)
    throw InputError(str_cat("report: '", run_dir, "' has no metrics.jsonl: not a run directory, or its run has not "
                             "begun training (mirrored train --out DIR writes it)"),
                     ExitCode::kUsage);
  parse_metrics(metrics->text, run_dir + "/metrics.jsonl", records);
  const std::optional<FileText> config = read_bounded(dir.fd, run_dir, "config.ini", kMaxConfigBytes);
  if (config) records.config = parse_config_text(config->text);
  if (const auto ranks = read_bounded(dir.fd, run_dir, "ranks.jsonl", kMaxRanksBytes))
    parse_ranks(ranks->text, run_dir + "/ranks.jsonl", records);
  std::optional<double> start = first_event_file_time(dir.fd);
  if (!start && config) start = config->changed_s;
  if (start && metrics->changed_s >= *start) records.wall_s = metrics->changed_s - *start;
  return records;
}

}  // namespace mirrored::app
