#pragma once
// Optimizers update a model's whole parameter arena in one pass over its flat buffers.
#include <memory>
#include <string>
#include <vector>

#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/parameter_arena.h"

namespace mirrored::optim {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;
  // Applies one update from the arena's (already averaged) gradients.
  virtual void step() = 0;
  virtual float lr() const = 0;
  virtual void set_lr(float lr) = 0;
  int64_t steps() const { return steps_; }
  // Named state tensors (momentum, moments), for checkpoints. Same order on every call.
  virtual std::vector<std::pair<std::string, Tensor*>> state() = 0;
  void set_steps(int64_t steps) { steps_ = steps; }
  // A device flag (int32 [1] beside the parameters, filled by kernels::flag_non_finite)
  // that makes every later step() leave parameters and state untouched while it is set,
  // without a host wait; null (the default) updates always. step() still counts the step:
  // a caller that reads the flag afterwards and finds it set corrects with set_steps().
  void skip_when(const Tensor* flag) { skip_flag_ = flag; }

 protected:
  int64_t steps_ = 0;
  const Tensor* skip_flag_ = nullptr;
};

class Sgd final : public Optimizer {
 public:
  Sgd(nn::ParameterArena& arena, kernels::SgdHyper hyper);
  std::string name() const override { return "sgd"; }
  void step() override;
  float lr() const override { return hyper_.lr; }
  void set_lr(float lr) override { hyper_.lr = lr; }
  std::vector<std::pair<std::string, Tensor*>> state() override { return {{"velocity", &velocity_}}; }

 private:
  nn::ParameterArena& arena_;
  kernels::SgdHyper hyper_;
  Tensor velocity_;
};

class Adam final : public Optimizer {
 public:
  Adam(nn::ParameterArena& arena, kernels::AdamHyper hyper);
  std::string name() const override { return hyper_.decoupled_weight_decay ? "adamw" : "adam"; }
  void step() override;
  float lr() const override { return hyper_.lr; }
  void set_lr(float lr) override { hyper_.lr = lr; }
  std::vector<std::pair<std::string, Tensor*>> state() override { return {{"m", &m_}, {"v", &v_}}; }

 private:
  nn::ParameterArena& arena_;
  kernels::AdamHyper hyper_;
  Tensor m_, v_;
};

}  // namespace mirrored::optim
