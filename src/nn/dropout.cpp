#include "mirrored/nn/conv.h"

#include "mirrored/core/fingerprint.h"

namespace mirrored::nn {
Dropout::Dropout(float p) : p_(p) {
  MIRRORED_CHECK(p >= 0.0f && p < 1.0f, "Dropout probability ", p, " outside [0, 1)");
}

Shape Dropout::build(const Shape& input, const std::string& prefix, size_t, ParameterArena&) {
  layer_key_ = fingerprint_text(prefix);
  return input;
}

const Tensor& Dropout::forward(const Tensor& x, Mode mode) {
  active_ = mode == Mode::kTrain && p_ > 0.0f;
  if (!active_) return x;
  const RunContext context = context_ ? *context_ : RunContext{};
  // One key per (run seed, step, layer); the kernel then draws sample k's mask from
  // stream k, k the sample's position in the global batch.
  Rng key(context.seed ^ layer_key_, static_cast<uint64_t>(context.step));
  const uint64_t seed = key.next_u64();
  ensure_shape(mask_, x.shape(), DType::kF32, x.device());
  ensure_shape(output_, x.shape(), DType::kF32, x.device());
  kernels::dropout_forward(x, p_, seed, context.first_sample, mask_, output_);
  return output_;
}

const Tensor& Dropout::backward(const Tensor& dy, bool need_input_grad) {
  if (!need_input_grad) return dinput_;
  if (!active_) {
    // A view of dy, kept apart from dinput_ so that dinput_ never aliases a buffer it
    // does not own (ensure_shape would write into it later).
    passthrough_ = dy;
    return passthrough_;
  }
  ensure_shape(dinput_, dy.shape(), DType::kF32, dy.device());
  kernels::dropout_backward(dy, mask_, dinput_);
  return dinput_;
}

}  // namespace mirrored::nn
