#include "mirrored/train/non_finite_guard.h"

#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/train/checkpointer.h"

namespace mirrored::train {
namespace {
constexpr int64_t kWarnedSkips = 3;  // then only the total at the end of the run
}  // namespace

NonFiniteGuard::NonFiniteGuard(const TrainConfig& config, bool is_chief) : config_(config), is_chief_(is_chief) {}

bool NonFiniteGuard::allow_update(const nn::ParameterArena& arena, int64_t step, float local_loss) {
  if (kernels::all_finite(arena.flat_grads())) return true;
  if (config_.nan_policy == NanPolicy::kSkip) {
    ++skipped_;
    if (is_chief_ && skipped_ <= kWarnedSkips)
      rank_warning(str_cat("step ", step, ": the averaged gradients hold NaN/Inf (this replica's loss ", local_loss,
                           "); the update is skipped (nan_policy = skip)",
                           skipped_ == kWarnedSkips ? "; further skips are only counted" : ""));
    return false;
  }
  // Only the chief's text is printed; it alone can see the checkpoint files.
  const auto saved = is_chief_ ? list_checkpoints(checkpoint_dir(config_)) : std::vector<std::string>{};
  throw Error(ExitCode::kNonFinite,
              str_cat("step ", step, ": the averaged gradients hold NaN/Inf (this replica's loss ", local_loss,
                      "); training stopped before applying them (nan_policy = stop). ",
                      saved.empty() ? std::string("No checkpoint was written before it")
                                    : str_cat("The last good checkpoint is '", saved.front(), "'"),
                      "; lower lr, or set nan_policy = skip to skip such steps"),
              /*uniform=*/true);
}

}  // namespace mirrored::train
