#include "mirrored/elastic/grow_back.h"

#include <chrono>
#include <filesystem>

#include "mirrored/checkpoint/run_directory.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/core/strings.h"
#include "mirrored/train/preemption.h"

namespace mirrored::elastic {
namespace {

// How often the chief looks for requests: as often as ranks read the relayed signals (a
// request waits at most this long plus a step).
constexpr double kPollSeconds = 0.1;

class GrowRequestWatcher final : public train::Callback {
 public:
  explicit GrowRequestWatcher(GrowBack& owner) : owner_(owner) {}
  // At the step's start, so a request stops the run at the end of this very step (the
  // stop flag is all-reduced there).
  void on_step_begin(train::TrainContext& ctx, int64_t) override { owner_.poll(ctx); }

 private:
  GrowBack& owner_;
};

int64_t wall_milliseconds() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::unique_ptr<train::Callback> GrowBack::watcher() { return std::make_unique<GrowRequestWatcher>(*this); }

void GrowBack::poll(train::TrainContext& ctx) {
  if (!ctx.strategy.is_chief() || run_state_dir() < 0) return;
  if (polled_ && since_poll_.seconds() < kPollSeconds) return;
  polled_ = true;
  since_poll_.reset();
  const std::string lines = requests_.read_new_lines();
  if (lines.empty()) return;
  const int world = ctx.strategy.num_replicas_in_sync();
  for (const ResizeRequest& request : parse_resize_requests(lines)) {
    if (!request.accepted) {
      rank_warning(str_cat("run-state file ", kResizeRequestFile, ": '", request.text,
                           "' is not a resize request (command, signal or host-returned HOST): ignored"));
      continue;
    }
    if (world >= launched_world_) {
      chief_info(str_cat("resize requested (", request.trigger, "): ignored, the job runs at its full size (", world,
                         " replica(s)); only a job that lost ranks grows back"));
      continue;
    }
    chief_info(str_cat("resize requested (", request.trigger, "): the job runs on ", world, " of its ",
                       launched_world_, " replica(s); saving a checkpoint at the end of this step and exiting ",
                       static_cast<int>(ExitCode::kResizeRequested), " for a relaunch at full size"));
    train::request_resize(request.trigger);
  }
}

void GrowBack::record_lost_hosts(const Membership& membership, const std::vector<std::string>& survivor_hosts) {
  for (const LostRank& lost : membership.lost) lost_hosts_.insert(lost.host);
  for (const std::string& host : survivor_hosts) lost_hosts_.erase(host);
  std::string text;
  for (const std::string& host : lost_hosts_) text += host + "\n";
  if (run_state_dir() >= 0) write_run_state_file(kLostHostsFile, text);
}

std::optional<PendingGrowth> pending_growth(const std::vector<io::JsonObject>& records, const std::string& origin) {
  std::optional<PendingGrowth> pending;
  for (size_t i = 0; i < records.size(); ++i) {
    const auto kind = io::json_optional_string(records[i], "kind");
    if (kind == "membership") pending.reset();  // a later change (a shrink, or this grow's record) settles it
    if (kind != "resize") continue;
    const std::string where = str_cat(origin, ":", i + 1);
    PendingGrowth growth;
    growth.step = io::json_integer(records[i], "step", where, 0, INT64_MAX);
    growth.from_world = io::json_integer(records[i], "world_size", where, 1, INT32_MAX);
    growth.trigger = io::json_string(records[i], "trigger", where);
    growth.stopped_ms = io::json_integer(records[i], "time_ms", where, 0, INT64_MAX);
    pending = growth;
  }
  return pending;
}

void GrowthReporter::on_train_begin(train::TrainContext& ctx) {
  if (!ctx.strategy.is_chief()) return;
  const std::string path = ctx.run_dir.file("metrics.jsonl");
  if (!std::filesystem::exists(path)) return;
  try {
    pending_ = pending_growth(io::read_jsonl(path), path);
  } catch (const Error& error) {
    rank_warning(str_cat("cannot tell whether this launch grows a resized job back: ", error.what()));
  }
}

void GrowthReporter::on_step_end(train::TrainContext& ctx, const train::StepEnd& end) {
  if (done_ || !pending_) return;
  done_ = true;
  const int world = ctx.strategy.num_replicas_in_sync();
  // Only the launch that resumed from the resize's own checkpoint, at a larger world, grew.
  if (end.step != pending_->step + 1 || world <= pending_->from_world) return;
  // Both ends as timestamps too (the old chief's clock and this one's).
  const int64_t first_step_ms = wall_milliseconds();
  const double downtime = static_cast<double>(first_step_ms - pending_->stopped_ms) / 1000.0;
  const io::JsonRecord grown{{"from_world", pending_->from_world},
                             {"to_world", static_cast<int64_t>(world)},
                             {"downtime_s", downtime},
                             {"trigger", pending_->trigger},
                             {"stopped_ms", pending_->stopped_ms},
                             {"first_step_ms", first_step_ms}};
  ctx.run_dir.log_metrics({{"kind", std::string("membership")},
                           {"step", pending_->step},
                           {"world_size", static_cast<int64_t>(world)},
                           {"lost", io::to_json_array({})},
                           {"grown", io::to_json_array({grown})}});
  chief_info(str_cat("membership: grown back from ", pending_->from_world, " to ", world, " replica(s) at step ",
                     pending_->step, " (", pending_->trigger, "); downtime ", fixed(downtime, 2),
                     " s from the end of step ", pending_->step, " before the relaunch to the end of step ",
                     end.step, " after it"));
}

}  // namespace mirrored::elastic
