#pragma once
// A layer of a model. Layers own their output and input-gradient buffers (reused across
// steps), declare parameters in the model's arena, and accumulate parameter gradients.
#include <string>

#include "mirrored/core/rng.h"
#include "mirrored/core/tensor.h"
#include "mirrored/nn/parameter_arena.h"

namespace mirrored::nn {

enum class Mode { kTrain, kEval };

class Layer {
 public:
  virtual ~Layer() = default;
  Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  virtual std::string kind() const = 0;  // "linear", "relu", ...

  // Declares parameters (names prefixed by `prefix`, e.g. "0.linear.") for one sample of
  // shape `input` and returns the output shape of one sample.
  virtual Shape build(const Shape& input, const std::string& prefix, size_t layer_index,
                      ParameterArena& arena) = 0;
  // After the arena is allocated: take views of the parameters and gradients.
  virtual void bind(ParameterArena& /*arena*/) {}
  // Initialises parameters (only ever called on the chief; replicas receive a broadcast).
  virtual void initialize(Rng& /*rng*/) {}

  // x: [batch, ...input]. Returns the output, valid until the next forward.
  virtual const Tensor& forward(const Tensor& x, Mode mode) = 0;
  // dy: gradient w.r.t. the last forward's output. Accumulates parameter gradients and
  // returns the gradient w.r.t. the input (undefined when !need_input_grad).
  virtual const Tensor& backward(const Tensor& dy, bool need_input_grad) = 0;
};

}  // namespace mirrored::nn
