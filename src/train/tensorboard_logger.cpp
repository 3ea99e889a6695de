#include "mirrored/train/tensorboard_logger.h"

#include <algorithm>

#include "mirrored/checkpoint/run_directory.h"
#include "mirrored/core/strings.h"

namespace mirrored::train {

void TensorBoardLogger::on_train_begin(TrainContext& ctx) {
  if (ctx.strategy.is_chief()) writer_ = std::make_unique<io::EventFileWriter>(ctx.run_dir.file("tensorboard"));
}

void TensorBoardLogger::on_log(TrainContext& ctx, const LogPoint& point) {
  std::vector<std::pair<std::string, float>> pending;
  pending.swap(ctx.pending_scalars);
  if (!writer_) return;
  std::vector<io::Scalar> scalars{
      {"train/loss", static_cast<float>(point.loss)},
      {"train/lr", static_cast<float>(point.lr)},
      {"train/samples_per_sec", static_cast<float>(point.samples_per_sec)},
      {"train/comm_ms", static_cast<float>(point.comm_ms)},
      {"train/exposed_comm_ms", static_cast<float>(point.exposed_comm_ms)},
      {"train/world_size", static_cast<float>(point.world_size)}};
  if (point.tokens_per_sec)
    scalars.push_back({"train/tokens_per_sec", static_cast<float>(*point.tokens_per_sec)});
  if (point.grad_norm) scalars.push_back({"train/grad_norm", static_cast<float>(*point.grad_norm)});
  // Several replicas: the slowest rank's score against the median rank, and each straggler's.
  if (!point.rank_scores.empty()) {
    double lowest = 1.0;
    for (const auto& scores : point.rank_scores) lowest = std::min(lowest, lowest_score(scores).score);
    scalars.push_back({"straggler/lowest_score", static_cast<float>(lowest)});
  }
  for (const auto& flag : point.stragglers)
    scalars.push_back({str_cat("straggler/rank", flag.rank), static_cast<float>(flag.score)});
  for (const auto& [tag, value] : pending) scalars.push_back({tag, value});
  writer_->add_scalars(point.step, scalars);
}

void TensorBoardLogger::on_evaluate(TrainContext&, const EvalPoint& point) {
  if (!writer_) return;
  const EvalResult& eval = point.eval;
  if (eval.kind == EvalKind::kLanguageModel) {
    writer_->add_scalars(point.step, {{"val/loss", static_cast<float>(eval.loss)},
                                      {"val/perplexity", static_cast<float>(eval.perplexity())},
                                      {"val/bits_per_byte", static_cast<float>(eval.bits_per_byte())}});
    return;
  }
  writer_->add_scalars(point.step, {{"test/loss", static_cast<float>(eval.loss)},
                                    {"test/accuracy", static_cast<float>(eval.accuracy)}});
}

}  // namespace mirrored::train
