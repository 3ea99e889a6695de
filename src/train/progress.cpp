#include "mirrored/core/strings.h"
#include "mirrored/train/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "mirrored/core/log.h"

namespace mirrored::train {
namespace {

constexpr double kRedrawSeconds = 0.1;  // a bar redrawn faster than this only costs time

std::string rate(double samples_per_sec) {
  if (samples_per_sec >= 1e4) return fixed(samples_per_sec / 1e3, 1) + "k";
  return fixed(samples_per_sec, 0);
}

int terminal_width(std::FILE* stream) {
  winsize size{};
  if (ioctl(fileno(stream), TIOCGWINSZ, &size) == 0 && size.ws_col > 20) return size.ws_col;
  return 100;
}

}  // namespace

ProgressStyle resolve_progress_style(config::ProgressSetting setting, bool quiet, bool stream_is_terminal) {
  if (quiet || setting == config::ProgressSetting::kOff) return ProgressStyle::kOff;
  if (setting == config::ProgressSetting::kBar) return ProgressStyle::kBar;
  if (setting == config::ProgressSetting::kPlain) return ProgressStyle::kPlain;
  return stream_is_terminal ? ProgressStyle::kBar : ProgressStyle::kPlain;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto total = static_cast<int64_t>(std::llround(seconds));
  char text[32];
  if (total >= 3600) {
    std::snprintf(text, sizeof(text), "%lld:%02lld:%02lld", static_cast<long long>(total / 3600),
                  static_cast<long long>(total / 60 % 60), static_cast<long long>(total % 60));
  } else {
    std::snprintf(text, sizeof(text), "%lld:%02lld", static_cast<long long>(total / 60),
                  static_cast<long long>(total % 60));
  }
  return text;
}

std::string format_bar(int64_t epoch, int64_t epochs, int64_t step, int64_t steps, double samples_per_sec,
                       double loss, double eta_seconds, int width) {
  constexpr int64_t kBarCells = 30;
  const int64_t filled = steps > 0 ? std::min(kBarCells, step * kBarCells / steps) : 0;
  std::string bar(static_cast<size_t>(filled), '=');
  if (filled < kBarCells) bar += '>';
  bar.resize(static_cast<size_t>(kBarCells), ' ');
  std::string line = str_cat("epoch ", epoch, "/", epochs, " [", bar, "] ", step, "/", steps, "  ",
                             rate(samples_per_sec), " samples/s  loss ", fixed(loss, 4), "  ETA ",
                             format_duration(eta_seconds));
  if (width > 0 && line.size() > static_cast<size_t>(width)) line.resize(static_cast<size_t>(width));
  return line;
}

std::string format_token_bar(const std::string& epoch_label, int64_t step, int64_t steps, double tokens_per_sec,
                             double ms_per_step, double loss, double eta_seconds, int width) {
  constexpr int64_t kBarCells = 30;
  const int64_t filled = steps > 0 ? std::min(kBarCells, step * kBarCells / steps) : 0;
  std::string bar(static_cast<size_t>(filled), '=');
  if (filled < kBarCells) bar += '>';
  bar.resize(static_cast<size_t>(kBarCells), ' ');
  std::string line = str_cat(epoch_label.empty() ? std::string("step") : epoch_label, " [", bar, "] ", step, "/",
                             steps, "  ", rate(tokens_per_sec), " tokens/s  ", fixed(ms_per_step, 1),
                             " ms/step  loss ", fixed(loss, 4), "  ETA ", format_duration(eta_seconds));
  if (width > 0 && line.size() > static_cast<size_t>(width)) line.resize(static_cast<size_t>(width));
  return line;
}

namespace {
// A token model (gpt): its windows' tokens, else 0.
int64_t tokens_per_sample(const TrainContext& ctx) {
  return ctx.config.model == config::ModelKind::kGpt ? ctx.config.gpt_context : 0;
}
// "epoch i/n" where the run spans at least one epoch (n: the epochs it covers), else "":
// a run of 300 steps in a 6,233-step epoch is not "epoch 1/1".
std::string epoch_label(const TrainContext& ctx, int64_t epoch) {
  if (ctx.steps_per_epoch <= 0 || ctx.total_steps < ctx.steps_per_epoch) return "";
  const int64_t epochs = (ctx.total_steps + ctx.steps_per_epoch - 1) / ctx.steps_per_epoch;
  return str_cat("epoch ", epoch, "/", epochs);
}
}  // namespace

ProgressReporter::ProgressReporter(ProgressStyle style, std::FILE* stream) : style_(style), stream_(stream) {}

void ProgressReporter::write(const std::string& text) { write_output(stream_, text); }

void ProgressReporter::on_train_begin(TrainContext& ctx) {
  active_ = ctx.strategy.is_chief() && style_ != ProgressStyle::kOff;
  run_clock_.reset();
}

void ProgressReporter::on_step_end(TrainContext& ctx, const StepEnd& step) {
  if (!active_) return;
  if (step.epoch != epoch_) {  // first step of an epoch (or of a run resumed mid-epoch)
    epoch_ = step.epoch;
    epoch_clock_.reset();
    clock_offset_ = step.seconds;  // the clock starts at the end of the epoch's first step
    epoch_steps_ = step.step_in_epoch;
    timed_steps_ = 0;
    first_index_ = step.step_in_epoch;
    run_steps_at_epoch_start_ = step.step - 1 - step.step_in_epoch;
    // The epoch's last step: its own length, or where max_steps cuts the run short.
    epoch_steps_total_ = std::min(ctx.steps_per_epoch, ctx.total_steps - run_steps_at_epoch_start_);
  }
  ++epoch_steps_;
  ++timed_steps_;
  if (style_ != ProgressStyle::kBar) return;
  const bool last = epoch_steps_ == epoch_steps_total_;
  if (last || timed_steps_ == 1 || redraw_clock_.seconds() >= kRedrawSeconds) {
    // The losses come to the host only here, at a redraw (on a GPU a wait for the step).
    const double loss_sum = step.losses ? step.losses->sum(first_index_, step.step_in_epoch + 1) : 0.0;
    draw_bar(ctx, step.epoch, epoch_steps_, loss_sum);
  }
}

void ProgressReporter::draw_bar(TrainContext& ctx, int64_t epoch, int64_t steps_done, double loss_sum) {
  const double elapsed = epoch_clock_.seconds() + clock_offset_;
  const double per_step = elapsed / static_cast<double>(std::max<int64_t>(timed_steps_, 1));
  const double samples_per_sec =
      elapsed > 0 ? static_cast<double>(timed_steps_ * ctx.config.batch_size) / elapsed : 0.0;
  const double eta = per_step * static_cast<double>(epoch_steps_total_ - steps_done);
  const double loss = loss_sum / static_cast<double>(std::max<int64_t>(timed_steps_, 1));
  const int64_t tokens = tokens_per_sample(ctx);
  const std::string line =
      tokens > 0 ? format_token_bar(epoch_label(ctx, epoch + 1), steps_done, epoch_steps_total_,
                                    samples_per_sec * static_cast<double>(ctx.config.accumulate_steps * tokens),
                                    1e3 * per_step, loss, eta, terminal_width(stream_) - 1)
                 : format_bar(epoch + 1, ctx.config.epochs, steps_done, epoch_steps_total_, samples_per_sec, loss, eta,
                              terminal_width(stream_) - 1);
  write("\r" + line + "\x1b[K");  // erase what a longer previous line left behind
  bar_open_ = true;
  redraw_clock_.reset();
}

void ProgressReporter::on_log(TrainContext& ctx, const LogPoint& point) {
  if (!active_) return;
  // A straggler is worth a line in every style, the bar's included.
  const auto& placements = ctx.strategy.runtime().cluster().placements();
  for (const auto& flag : point.stragglers) {
    const std::string host =
        static_cast<size_t>(flag.rank) < placements.size() ? placements[static_cast<size_t>(flag.rank)].host : "?";
    write(str_cat(bar_open_ ? "\r\x1b[K" : "", "warning: straggler: rank ", flag.rank, " on ", host, " scores ",
                  fixed(flag.score, 2), " in ", scored_phase_name(flag.phase), " against the median rank at step ",
                  point.step, " (below straggler.threshold = ", ctx.config.straggler_threshold, " for ", flag.points,
                  " log points)\n"));
    bar_open_ = false;
  }
  const bool plain = style_ == ProgressStyle::kPlain;
  if (!plain && log_level() < LogLevel::kVerbose) return;  // the bar already shows it
  // The run's ETA from its average step time so far (step 0's one-time costs included).
  const double per_step = run_clock_.seconds() / static_cast<double>(std::max<int64_t>(point.step, 1));
  const std::string eta = format_duration(per_step * static_cast<double>(ctx.total_steps - point.step));
  std::string line;
  if (point.tokens_per_sec) {
    // A language model: tokens/s and the step time over the log interval; its epoch only
    // where the run spans one.
    const int64_t samples_per_step = ctx.config.batch_size * ctx.config.accumulate_steps;
    const double ms_per_step =
        point.samples_per_sec > 0 ? 1e3 * static_cast<double>(samples_per_step) / point.samples_per_sec : 0.0;
    const std::string epoch = epoch_label(ctx, point.epoch + 1);
    line = str_cat(epoch.empty() ? std::string() : epoch + "  ", "step ", point.step, "/", ctx.total_steps,
                   "  loss ", fixed(point.loss, 4), "  lr ", point.lr, "  ", fixed(*point.tokens_per_sec, 0),
                   " tokens/s  ", fixed(ms_per_step, 1), " ms/step  run ETA ", eta);
  } else {
    line = str_cat("epoch ", point.epoch + 1, "/", ctx.config.epochs, "  step ", point.step - run_steps_at_epoch_start_,
                   "/", epoch_steps_total_, "  (", point.step, "/", ctx.total_steps, ")  loss ", fixed(point.loss, 4),
                   "  lr ", point.lr, "  ", fixed(point.samples_per_sec, 0), " samples/s  run ETA ", eta);
  }
  // In bar mode (verbose) the line goes above the bar, which the next step redraws.
  write((bar_open_ ? "\r\x1b[K" : "") + line + "\n");
  bar_open_ = false;
}

void ProgressReporter::on_epoch_end(TrainContext&, const EpochEnd&) {
  if (!active_ || style_ != ProgressStyle::kBar) return;
  if (bar_open_) write("\n");  // keep the finished bar; the epoch summary follows on stdout
  bar_open_ = false;
}

}  // namespace mirrored::train
