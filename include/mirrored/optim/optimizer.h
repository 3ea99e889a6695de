#pragma once
// Optimizers update a model's parameter arena, or this replica's shard of it (ZeRO stage 1),
// range by range (update_ranges.h): each range of the flat buffers with its own weight decay.
#include <memory>
#include <string>
#include <vector>

#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/parameter_arena.h"
#include "mirrored/optim/update_ranges.h"

namespace mirrored::optim {

// The whole arena as one range.
inline ArenaRange whole_arena(const nn::ParameterArena& arena) { return {0, arena.numel()}; }

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;
  // Applies one update from the arena's (already averaged) gradients in shard().
  virtual void step() = 0;
  virtual float lr() const = 0;
  virtual void set_lr(float lr) = 0;
  int64_t steps() const { return steps_; }
  // Named state tensors (momentum, moments), for checkpoints. Same order on every call.
  // Each holds shard().numel() values: element i belongs to arena element shard().begin + i.
  virtual std::vector<std::pair<std::string, Tensor*>> state() = 0;
  void set_steps(int64_t steps) { steps_ = steps; }
  // A device flag (int32 [1] beside the parameters, filled by kernels::flag_non_finite)
  // that makes every later step() leave parameters and state untouched while it is set,
  // without a host wait; null (the default) updates always. step() still counts the step:
  // a caller that reads the flag afterwards and finds it set corrects with set_steps().
  void skip_when(const Tensor* flag) { skip_flag_ = flag; }
  // A device factor (f32 [1] beside the parameters, e.g. the clip's from
  // kernels::clip_factor) that every later step() multiplies each gradient by as it reads
  // it, leaving the gradients themselves untouched: the bits of scaling them first, without
  // a pass of its own over the arena. Null (the default) scales nothing.
  void scale_gradients_by(const Tensor* factor) { grad_scale_ = factor; }

  // The part of the arena this optimizer updates and holds state for (all of it unless
  // sharded).
  ArenaRange shard() const { return shard_; }
  // Bytes of optimizer state held here.
  int64_t state_bytes();

 protected:
  // `weight_decay` goes to the ranges decays() accepts; `shard` must lie inside the arena.
  Optimizer(nn::ParameterArena& arena, float weight_decay, ArenaRange shard);
  // A state tensor of the shard's size on the parameters' device (zeros).
  Tensor shard_state() const;
  // Views of one range: parameters, gradients, and `state` (a shard_state() tensor).
  Tensor params_of(const UpdateRange& r) const;
  Tensor grads_of(const UpdateRange& r) const;
  Tensor state_of(const Tensor& state, const UpdateRange& r) const;

  nn::ParameterArena& arena_;
  ArenaRange shard_;
  std::vector<UpdateRange> ranges_;
  int64_t steps_ = 0;
  const Tensor* skip_flag_ = nullptr;
  const Tensor* grad_scale_ = nullptr;
};

class Sgd final : public Optimizer {
 public:
  // The whole arena, or `shard` of it.
  Sgd(nn::ParameterArena& arena, kernels::SgdHyper hyper);
  Sgd(nn::ParameterArena& arena, kernels::SgdHyper hyper, ArenaRange shard);
  std::string name() const override { return "sgd"; }
  void step() override;
  float lr() const override { return hyper_.lr; }
  void set_lr(float lr) override { hyper_.lr = lr; }
  std::vector<std::pair<std::string, Tensor*>> state() override { return {{"velocity", &velocity_}}; }

 private:
  kernels::SgdHyper hyper_;
  Tensor velocity_;
};

class Adam final : public Optimizer {
 public:
  Adam(nn::ParameterArena& arena, kernels::AdamHyper hyper);
  Adam(nn::ParameterArena& arena, kernels::AdamHyper hyper, ArenaRange shard);
  std::string name() const override { return hyper_.decoupled_weight_decay ? "adamw" : "adam"; }
  void step() override;
  float lr() const override { return hyper_.lr; }
  void set_lr(float lr) override { hyper_.lr = lr; }
  std::vector<std::pair<std::string, Tensor*>> state() override { return {{"m", &m_}, {"v", &v_}}; }

 private:
  kernels::AdamHyper hyper_;
  Tensor m_, v_;
};

}  // namespace mirrored::optim
