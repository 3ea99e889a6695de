#pragma once
// Learning-rate schedules as pure functions of the update count, so a run resumed from a
// checkpoint at step s continues on exactly the curve an uninterrupted run follows (the
// checkpoint holds the step, nothing else is needed).
//
// Every schedule may start with a linear warmup (Goyal et al., "Accurate, Large Minibatch
// SGD"): update i < warmup_steps uses base_lr * (i + 1) / warmup_steps. After it:
//   constant  base_lr
//   cosine    min_lr + (base_lr - min_lr) * (1 + cos(pi * t)) / 2, t = progress in [0, 1]
//             from the end of warmup to total_steps (Loshchilov & Hutter, SGDR, one cycle)
//   step      base_lr * gamma^k, k = milestones passed (PyTorch's MultiStepLR)
#include <cstdint>
#include <string>
#include <vector>

namespace mirrored::optim {

enum class LrScheduleKind { kConstant, kCosine, kStep };

struct LrScheduleSpec {
  LrScheduleKind kind = LrScheduleKind::kConstant;
  double base_lr = 0.05;
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;           // cosine reaches min_lr here
  double min_lr = 0.0;               // cosine floor
  std::vector<int64_t> milestones;   // step: updates at which the rate is multiplied by gamma
  double gamma = 0.1;
};

class LrSchedule {
 public:
  // Throws Error(kUsage) for an inconsistent spec (milestones not increasing, min_lr > base_lr).
  explicit LrSchedule(LrScheduleSpec spec);
  // The rate of update `step` (0 for the first update of the run).
  double lr_at(int64_t step) const;
  const LrScheduleSpec& spec() const { return spec_; }

 private:
  LrScheduleSpec spec_;
};

LrScheduleKind lr_schedule_kind(const std::string& name);  // constant | cosine | step
std::string lr_schedule_name(LrScheduleKind kind);

}  // namespace mirrored::optim
