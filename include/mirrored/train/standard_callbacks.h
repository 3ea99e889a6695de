#pragma once
// The callbacks every `mirrored train` run has.
#include "mirrored/train/callback.h"

namespace mirrored::train {

// metrics.jsonl records ("train" per log point, "eval" per evaluation); chief only.
// Classifiers' eval records hold test_loss, test_accuracy and test_samples; language
// models' val_loss, perplexity, bits_per_byte and val_windows, and their train records
// add tokens_per_sec.
class MetricsLogger final : public Callback {
 public:
  void on_log(TrainContext& ctx, const LogPoint& point) override;
  void on_evaluate(TrainContext& ctx, const EvalPoint& point) override;
};

// Human-readable results on rank 0's stdout: the run's header, a line per epoch and the
// final result. Step-by-step progress is ProgressReporter's (stderr).
class ConsoleLogger final : public Callback {
 public:
  void on_train_begin(TrainContext& ctx) override;
  void on_evaluate(TrainContext& ctx, const EvalPoint& point) override;  // with eval_every > 0
  void on_epoch_end(TrainContext& ctx, const EpochEnd& end) override;
  void on_train_end(TrainContext& ctx, const TrainSummary& summary) override;
};

// final.h5 with every parameter; chief only.
class FinalParametersWriter final : public Callback {
 public:
  void on_train_end(TrainContext& ctx, const TrainSummary& summary) override;
};

}  // namespace mirrored::train
