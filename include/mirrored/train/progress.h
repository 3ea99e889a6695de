#pragma once
// Rank-0 progress on stderr, the way Keras' fit() shows it. On a terminal: one live bar per
// epoch (steps, samples/s, loss, ETA) redrawn in place with '\r'. Anywhere else (Slurm
// logs, CI, a pipe): one plain line per log point (every `log_every` steps), since a log
// file full of carriage returns is unreadable. Results (epoch lines, the final accuracy)
// stay on stdout, from ConsoleLogger.
//
// Under mpirun a rank's stderr is a pipe to the launcher even when mpirun runs in a
// terminal, so `progress = auto` gives plain lines there; `--progress bar` asks for the bar.
#include <cstdint>
#include <cstdio>
#include <string>

#include "mirrored/config/config.h"
#include "mirrored/core/timer.h"
#include "mirrored/train/callback.h"

namespace mirrored::train {

enum class ProgressStyle { kBar, kPlain, kOff };

// `setting` is the config's `progress` value; auto means a bar on a terminal, else plain.
ProgressStyle resolve_progress_style(config::ProgressSetting setting, bool quiet, bool stream_is_terminal);

// "1:02:03" or "2:03" (minutes:seconds below an hour); "?" before the first estimate.
std::string format_duration(double seconds);
// "epoch 2/3 [=====>    ] 117/468  52.1k samples/s  loss 0.4821  ETA 0:03", cut to `width`.
std::string format_bar(int64_t epoch, int64_t epochs, int64_t step, int64_t steps, double samples_per_sec,
                       double loss, double eta_seconds, int width);
// A language model's bar, in tokens and step time (a sample is a window of tokens, so
// samples/s says little): "epoch 1/2 [===>   ] 117/6233  52.1k tokens/s  12.3 ms/step  loss
// 2.4821  ETA 0:03"; `epoch_label` (e.g. "epoch 1/2") is left out when empty, as for a
// run shorter than an epoch, whose bar then counts the run's steps.
std::string format_token_bar(const std::string& epoch_label, int64_t step, int64_t steps, double tokens_per_sec,
                             double ms_per_step, double loss, double eta_seconds, int width);

class ProgressReporter final : public Callback {
 public:
  // Reports only on the chief; `stream` is where the bar or the lines go.
  explicit ProgressReporter(ProgressStyle style, std::FILE* stream = stderr);

  void on_train_begin(TrainContext& ctx) override;
  void on_step_end(TrainContext& ctx, const StepEnd& step) override;
  void on_log(TrainContext& ctx, const LogPoint& point) override;
  void on_epoch_end(TrainContext& ctx, const EpochEnd& end) override;

 private:
  // `loss_sum`: this rank's losses of the epoch's steps so far (the bar costs no collective).
  void draw_bar(TrainContext& ctx, int64_t epoch, int64_t steps_done, double loss_sum);
  void write(const std::string& text);

  ProgressStyle style_;
  std::FILE* stream_;
  bool active_ = false;      // chief and not off
  bool bar_open_ = false;    // a bar line is on screen without its newline yet
  Stopwatch epoch_clock_;
  double clock_offset_ = 0.0;
  Stopwatch run_clock_;
  Stopwatch redraw_clock_;
  int64_t epoch_ = -1;
  int64_t epoch_steps_ = 0;        // steps of this epoch done (a resumed run starts mid-epoch)
  int64_t timed_steps_ = 0;        // steps since epoch_clock_ started
  int64_t epoch_steps_total_ = 0;
  int64_t first_index_ = 0;        // the epoch index of the first step the bar averages
  int64_t run_steps_at_epoch_start_ = 0;
};

}  // namespace mirrored::train
