#include "mirrored/train/evaluate.h"

#include "mirrored/nn/loss.h"

namespace mirrored::train {

EvalResult evaluate(distribute::MirroredStrategy& strategy, distribute::DistributedModel& model,
                    distribute::EvalDataset& data) {
  nn::CrossEntropyLoss loss;
  // {loss sum, correct, count}, reduced in one all-reduce. Doubles hold these counts exactly.
  double sums[3] = {0.0, 0.0, 0.0};
  for (int64_t b = 0; b < data.num_batches(); ++b) {
    const auto& batch = data.batch(b);
    const auto value = loss.forward(model.forward(batch.images, nn::Mode::kEval), batch.labels, false);
    sums[0] += value.loss_sum;
    sums[1] += static_cast<double>(value.correct);
    sums[2] += static_cast<double>(value.count);
  }
  strategy.communicator().allreduce(sums, 3, comm::ReduceOp::kSum);
  EvalResult result;
  result.samples = static_cast<int64_t>(sums[2]);
  if (result.samples > 0) {
    result.loss = sums[0] / sums[2];
    result.accuracy = sums[1] / sums[2];
  }
  return result;
}

}  // namespace mirrored::train
