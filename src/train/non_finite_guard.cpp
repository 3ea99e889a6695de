#include "mirrored/train/non_finite_guard.h"


#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/train/checkpointer.h"

namespace mirrored::train {
namespace {
constexpr int64_t kWarnedSkips = 3;  // then only the total at the end of the run

std::string loss_text(const std::optional<float>& loss) {
  return loss ? str_cat(" (this replica's loss ", *loss, ")") : std::string();
}
}  // namespace

NonFiniteGuard::NonFiniteGuard(const config::TrainConfig& config, bool is_chief)
    : config_(config), is_chief_(is_chief) {}

void NonFiniteGuard::flag(distribute::DistributedModel& model, optim::Optimizer& optimizer, int64_t step) {
  const Tensor& grads = model.parameters().flat_grads();
  if (!flag_.defined() || flag_.device() != grads.device()) {
    flag_ = Tensor({1}, DType::kI32, grads.device());
    tally_ = Tensor({2}, DType::kI32, grads.device());
    every_step_ = grads.device().is_cpu();
  }
  model.flag_non_finite(flag_);
  // Under stop no update may follow a bad one until the host has seen it.
  kernels::tally_non_finite(flag_, tally_, step, config_.nan_policy == config::NanPolicy::kStop);
  optimizer.skip_when(&flag_);
  last_flagged_step_ = step;
}

void NonFiniteGuard::settle(optim::Optimizer& optimizer, const LossOf& local_loss) {
  if (!tally_.defined()) return;
  Tensor host({2}, DType::kI32);
  kernels::copy(tally_, host);  // from a GPU: the one wait, at the caller's chosen points
  const int64_t flagged = host.data<int32_t>()[0], first = host.data<int32_t>()[1];
  if (flagged == 0) return;
  tally_.zero();
  optimizer.set_steps(optimizer.steps() - flagged);  // step() counted the updates it skipped
  const std::optional<float> loss = local_loss ? local_loss(first) : std::nullopt;
  if (config_.nan_policy == config::NanPolicy::kSkip) {
    const int64_t warned_before = skipped_;
    skipped_ += flagged;
    if (is_chief_ && warned_before < kWarnedSkips) {
      // Settled every step (CPU) there is one step at a time; on a GPU a log interval's.
      const std::string which =
          flagged == 1 ? str_cat("step ", first, ": the averaged gradients hold NaN/Inf", loss_text(loss),
                                 "; the update is skipped")
                       : str_cat(flagged, " of steps ", first, " to ", last_flagged_step_,
                                 ": the averaged gradients hold NaN/Inf (first at step ", first, loss_text(loss),
                                 "); their updates are skipped");
      rank_warning(str_cat(which, " (nan_policy = skip)",
                           skipped_ >= kWarnedSkips ? "; further skips are only counted" : ""));
    }
    return;
  }
  // Only the chief's text is printed; it alone can see the checkpoint files.
  const auto saved =
      is_chief_ ? checkpoint::list_checkpoints(checkpoint::checkpoint_dir(config_)) : std::vector<std::string>{};
  throw Error(ExitCode::kNonFinite,
              str_cat("step ", first, ": the averaged gradients hold NaN/Inf", loss_text(loss),
                      "; training stopped before applying them (nan_policy = stop). ",
                      saved.empty() ? std::string("No checkpoint was written before it")
                                    : str_cat("The last good checkpoint is '", saved.front(), "'"),
                      "; lower lr, or set nan_policy = skip to skip such steps"),
              /*uniform=*/true);
}

void settle_guard(NonFiniteGuard& guard, optim::Optimizer& optimizer, StepLosses& losses, int64_t epoch_start,
                  int64_t steps_per_epoch) {
  guard.settle(optimizer, [&](int64_t bad_step) -> std::optional<float> {
    const int64_t index = bad_step - 1 - epoch_start;
    if (index < 0 || index >= steps_per_epoch) return std::nullopt;
    return losses.loss(index);
  });
}

}  // namespace mirrored::train
