#include "mirrored/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "mirrored/core/error.h"
#include "mirrored/core/strings.h"

namespace mirrored::optim {

LrSchedule::LrSchedule(LrScheduleSpec spec) : spec_(std::move(spec)) {
  MIRRORED_CHECK(spec_.base_lr > 0.0 && spec_.warmup_steps >= 0 && spec_.total_steps >= 0, "lr schedule: base lr ",
                 spec_.base_lr, ", warmup ", spec_.warmup_steps, " steps, total ", spec_.total_steps, " steps");
  if (spec_.kind == LrScheduleKind::kCosine && spec_.min_lr > spec_.base_lr)
    throw InputError(str_cat("lr_min = ", spec_.min_lr, " is above lr = ", spec_.base_lr,
                             ": the cosine schedule decays from lr to lr_min"),
                     ExitCode::kUsage);
  if (spec_.kind == LrScheduleKind::kStep) {
    if (spec_.milestones.empty())
      throw InputError("lr_schedule = step needs lr_milestones (the epochs at which the rate drops)",
                       ExitCode::kUsage);
    for (size_t i = 1; i < spec_.milestones.size(); ++i)
      if (spec_.milestones[i] <= spec_.milestones[i - 1])
        throw InputError(str_cat("lr_milestones = ", join(spec_.milestones, ","), ": expected increasing values"),
                         ExitCode::kUsage);
  }
}

double LrSchedule::lr_at(int64_t step) const {
  const LrScheduleSpec& s = spec_;
  if (step < s.warmup_steps)
    return s.base_lr * static_cast<double>(step + 1) / static_cast<double>(s.warmup_steps);
  switch (s.kind) {
    case LrScheduleKind::kConstant:
      return s.base_lr;
    case LrScheduleKind::kCosine: {
      const int64_t span = s.total_steps - s.warmup_steps;
      if (span <= 0) return s.base_lr;
      const double t = std::min(1.0, static_cast<double>(step - s.warmup_steps) / static_cast<double>(span));
      return s.min_lr + (s.base_lr - s.min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * t));
    }
    case LrScheduleKind::kStep: {
      const auto passed = std::upper_bound(s.milestones.begin(), s.milestones.end(), step) - s.milestones.begin();
      return s.base_lr * std::pow(s.gamma, static_cast<double>(passed));
    }
  }
  return s.base_lr;
}

LrScheduleKind lr_schedule_kind(const std::string& name) {
  if (name == "constant") return LrScheduleKind::kConstant;
  if (name == "cosine") return LrScheduleKind::kCosine;
  if (name == "step") return LrScheduleKind::kStep;
  throw InputError(str_cat("lr_schedule = '", name, "': expected one of: constant, cosine, step"), ExitCode::kUsage);
}

std::string lr_schedule_name(LrScheduleKind kind) {
  switch (kind) {
    case LrScheduleKind::kConstant: return "constant";
    case LrScheduleKind::kCosine: return "cosine";
    case LrScheduleKind::kStep: return "step";
  }
  return "constant";
}

}  // namespace mirrored::optim
