#pragma once
// TensorBoard scalars in RUN_DIR/tensorboard/ (chief only): at every log point train/loss,
// train/lr, train/samples_per_sec (token models: train/tokens_per_sec), train/comm_ms and
// train/exposed_comm_ms (several replicas: straggler/lowest_score, the lowest rank's
// straggler score, and straggler/rank<r> for each rank flagged as a straggler); after every evaluation test/loss and test/accuracy (token models:
// val/loss, val/perplexity and val/bits_per_byte). `tensorboard --logdir runs/` then shows every run.
#include <memory>

#include "mirrored/io/event_file_writer.h"
#include "mirrored/train/callback.h"

namespace mirrored::train {

class TensorBoardLogger final : public Callback {
 public:
  void on_train_begin(TrainContext& ctx) override;
  void on_log(TrainContext& ctx, const LogPoint& point) override;
  void on_evaluate(TrainContext& ctx, const EvalPoint& point) override;

 private:
  std::unique_ptr<io::EventFileWriter> writer_;  // null off the chief
};

}  // namespace mirrored::train
