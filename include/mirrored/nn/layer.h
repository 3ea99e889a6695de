#pragma once
// A layer of a model. Layers own their output and input-gradient buffers (reused across
// steps), declare parameters in the model's arena, and accumulate parameter gradients.
#include <cstdint>
#include <string>
#include <vector>

#include "mirrored/core/precision.h"
#include "mirrored/core/rng.h"
#include "mirrored/core/tensor.h"
#include "mirrored/nn/parameter_arena.h"

namespace mirrored::nn {

enum class Mode { kTrain, kEval };

// Sums a tensor over every replica, in place. A collective: every replica calls it the
// same number of times in the same order (layers call it in forward order, then in
// backward order, from the thread that runs the step). nn/ declares it; the distribute
// layer implements it over the world communicator (sync batch norm).
class CrossReplicaReducer {
 public:
  virtual ~CrossReplicaReducer() = default;
  virtual void sum(Tensor& values) = 0;
};

// What a layer may need to know about the step it runs in, owned by the Model.
struct RunContext {
  uint64_t seed = 0;       // dropout masks: (seed, step, layer, global sample index)
  int64_t step = 0;        // training step, set by the loop before each forward
  int64_t first_sample = 0;  // the global-batch position of the batch's row 0 (dropout keys)
  CrossReplicaReducer* reducer = nullptr;  // null: a single replica, nothing to reduce
  // The arithmetic of the model's matrix products and convolutions (core/precision.h).
  Precision precision = Precision::kF32;
};

class PartTimer;  // part_timer.h

// A named piece of a composite layer (a transformer block's attention core, its
// projections, its layer norms), which the layer times into a PartTimer.
struct LayerPart {
  const char* name;      // as the layer reports it to the PartTimer
  double forward_flops;  // as Layer::forward_flops, for this piece alone
};

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
  // After build(), before bind(): may take over the work of the layers that follow it in
  // the model (`following`, in order) on `device`, computing in one kernel what they
  // would compute apart, with the same bits. Returns how many it took (0: none); the model
  // then skips their forward and backward, and this layer's forward returns the last
  // one's output and its backward takes that output's gradient. Their parameters (none,
  // for the layers fused today) and names stay theirs.
  virtual size_t fuse_following(const std::vector<Layer*>& /*following*/, Device /*device*/) { return 0; }
  // Initialises parameters (only ever called on the chief; replicas receive a broadcast).
  virtual void initialize(Rng& /*rng*/) {}
  // The model's run context (stable for the model's lifetime). Composite layers pass it on.
  virtual void attach(const RunContext* context) { context_ = context; }
  // The model's precision; float32 for a layer that no model holds.
  Precision precision() const { return context_ ? context_->precision : Precision::kF32; }

  // x: [batch, ...input]. Returns the output, valid until the next forward. Float32,
  // except a model's input, which its first layer alone reads: Embedding takes int32 ids.
  virtual const Tensor& forward(const Tensor& x, Mode mode) = 0;
  // dy: gradient w.r.t. the last forward's output. Accumulates parameter gradients and
  // returns the gradient w.r.t. the input (undefined when !need_input_grad).
  virtual const Tensor& backward(const Tensor& dy, bool need_input_grad) = 0;

  // What the layer computes, for `bench layers` and FLOP counts. After build():
  // FLOPs (2 per multiply-add) of one forward of `batch` samples of the shape it was built
  // for: its matrix products and convolutions; 0 for a memory-bound layer (elementwise,
  // pooling, normalisation). Backward costs twice that with the input gradient, once without.
  // A composite layer's are its parts'.
  virtual double forward_flops(int64_t batch) const {
    double flops = 0.0;
    for (const LayerPart& part : parts(batch)) flops += part.forward_flops;
    return flops;
  }
  // A composite layer's pieces in forward order, each once; empty for the others.
  virtual std::vector<LayerPart> parts(int64_t /*batch*/) const { return {}; }
  // Times the pieces into `timer` (null: none); a layer without pieces has nothing to time.
  virtual void set_part_timer(PartTimer* /*timer*/) {}

 protected:
  const RunContext* context_ = nullptr;
};

}  // namespace mirrored::nn
