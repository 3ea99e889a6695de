#include "mirrored/train/step_losses.h"

#include <algorithm>

#include "mirrored/core/error.h"

namespace mirrored::train {
namespace {

float mean_of(const float* losses, int count) {
  float sum = 0.0f;
  for (int i = 0; i < count; ++i) sum += losses[i];
  return sum / static_cast<float>(count);
}

}  // namespace

StepLosses::StepLosses(Device device, int micro_batches, int64_t steps)
    : device_(Tensor({std::max<int64_t>(steps, 1), micro_batches}, DType::kF32, device)),
      micro_batches_(micro_batches),
      steps_(steps) {
  MIRRORED_CHECK(micro_batches >= 1, "StepLosses: ", micro_batches, " micro-batches");
}

void StepLosses::restart() {
  host_.clear();
  read_ = 0;
}

Tensor StepLosses::slots(int64_t index) const {
  MIRRORED_CHECK(index >= 0 && index < steps_, "StepLosses: step index ", index, " outside [0, ", steps_, ")");
  return device_.view(index * micro_batches_, {micro_batches_});
}

void StepLosses::read_until(int64_t to) {
  MIRRORED_CHECK(to <= steps_, "StepLosses: reading up to step ", to, " of ", steps_);
  if (to <= read_) return;
  const std::vector<float> values = device_.view(read_ * micro_batches_, {(to - read_) * micro_batches_}).to_vector();
  for (int64_t i = 0; i < to - read_; ++i) host_.push_back(mean_of(values.data() + i * micro_batches_, micro_batches_));
  read_ = to;
}

float StepLosses::loss(int64_t index) {
  read_until(index + 1);
  return host_[static_cast<size_t>(index)];
}

double StepLosses::sum(int64_t from, int64_t to) {
  read_until(to);
  double total = 0.0;
  for (int64_t i = from; i < to; ++i) total += host_[static_cast<size_t>(i)];
  return total;
}

float step_loss(const Tensor& micro_losses) {
  const std::vector<float> values = micro_losses.to_vector();
  return values.empty() ? 0.0f : mean_of(values.data(), static_cast<int>(values.size()));
}

}  // namespace mirrored::train
