#include "mirrored/train/evaluate.h"

#include <algorithm>
#include <cmath>
#include <vector>
#include <numbers>

#include "mirrored/nn/loss.h"

namespace mirrored::train {
namespace {

// {loss sum, correct, scored positions, samples, bytes the targets decode to, batches}
// over this replica's batches, reduced in one all-reduce. Doubles hold these counts
// exactly. With reduction = invariant the loss sum is then replaced by an exact sum of the
// batches' loss sums: every batch holds the same samples at any world size
// (data::eval_shard), so the result is the same bits at any world size.
template <typename Data>
EvalResult score(distribute::MirroredStrategy& strategy, distribute::DistributedModel& model, Data& data,
                 EvalKind kind, double target_bytes) {
  nn::CrossEntropyLoss loss;
  double sums[6] = {0.0, 0.0, 0.0, 0.0, target_bytes, 0.0};
  std::vector<double> batch_losses;
  for (int64_t b = 0; b < data.num_batches(); ++b) {
    const auto& batch = data.batch(b);
    const auto value = loss.forward(model.forward(batch.inputs, nn::Mode::kEval), batch.targets, false);
    sums[0] += value.loss_sum;
    sums[1] += static_cast<double>(value.correct);
    sums[2] += static_cast<double>(value.count);
    sums[3] += static_cast<double>(batch.size());
    batch_losses.push_back(value.loss_sum);
  }
  sums[5] = static_cast<double>(batch_losses.size());
  strategy.communicator().allreduce(sums, 6, comm::ReduceOp::kSum);
  if (strategy.reduction() == distribute::Reduction::kInvariant)
    sums[0] = strategy.reduce_exact(batch_losses, std::max<int64_t>(1, static_cast<int64_t>(sums[5])));
  EvalResult result;
  result.kind = kind;
  result.samples = static_cast<int64_t>(sums[3]);
  result.tokens = static_cast<int64_t>(sums[2]);
  result.bytes = static_cast<int64_t>(sums[4]);
  if (sums[2] > 0) {
    result.loss = sums[0] / sums[2];
    result.accuracy = sums[1] / sums[2];
  }
  return result;
}

}  // namespace

double EvalResult::perplexity() const { return std::exp(loss); }
double EvalResult::bits_per_byte() const {
  // Byte tokens: the mean loss in bits, as before subword tokens existed (the same bits).
  if (bytes == tokens || bytes <= 0) return loss / std::numbers::ln2;
  return loss * static_cast<double>(tokens) / static_cast<double>(bytes) / std::numbers::ln2;
}

EvalResult evaluate(distribute::MirroredStrategy& strategy, distribute::DistributedModel& model,
                    distribute::EvalDataset& data) {
  return score(strategy, model, data, EvalKind::kClassification, 0.0);
}

EvalResult evaluate(distribute::MirroredStrategy& strategy, distribute::DistributedModel& model,
                    distribute::TokenEvalDataset& data) {
  return score(strategy, model, data, EvalKind::kLanguageModel, static_cast<double>(data.target_bytes()));
}

void append_eval_fields(io::JsonRecord& record, const EvalResult& result) {
  if (result.kind == EvalKind::kLanguageModel) {
    record.emplace_back("val_loss", result.loss);
    record.emplace_back("perplexity", result.perplexity());
    record.emplace_back("bits_per_byte", result.bits_per_byte());
    record.emplace_back("val_windows", result.samples);
  } else {
    record.emplace_back("test_loss", result.loss);
    record.emplace_back("test_accuracy", result.accuracy);
    record.emplace_back("test_samples", result.samples);
  }
}

}  // namespace mirrored::train
