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

StepLosses::StepLosses(Device device, int passes, int64_t steps)
    : device_(Tensor({std::max<int64_t>(steps, 1), passes}, DType::kF32, device)),
      passes_(passes),
      steps_(steps) {
  MIRRORED_CHECK(passes >= 1, "StepLosses: ", passes, " passes per step");
}

void StepLosses::restart() {
  host_.clear();
  host_passes_.clear();
  read_ = 0;
}

Tensor StepLosses::slots(int64_t index) const {
  MIRRORED_CHECK(index >= 0 && index < steps_, "StepLosses: step index ", index, " outside [0, ", steps_, ")");
  return device_.view(index * passes_, {passes_});
}

void StepLosses::read_until(int64_t to) {
  MIRRORED_CHECK(to <= steps_, "StepLosses: reading up to step ", to, " of ", steps_);
  if (to <= read_) return;
  const std::vector<float> values = device_.view(read_ * passes_, {(to - read_) * passes_}).to_vector();
  for (int64_t i = 0; i < to - read_; ++i) host_.push_back(mean_of(values.data() + i * passes_, passes_));
  host_passes_.insert(host_passes_.end(), values.begin(), values.end());
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

std::vector<double> StepLosses::pass_losses(int64_t from, int64_t to) {
  read_until(to);
  return std::vector<double>(host_passes_.begin() + from * passes_, host_passes_.begin() + to * passes_);
}

float step_loss(const Tensor& pass_losses) {
  const std::vector<float> values = pass_losses.to_vector();
  return values.empty() ? 0.0f : mean_of(values.data(), static_cast<int>(values.size()));
}

}  // namespace mirrored::train
