#include "mirrored/app/shrink_recovery.h"

#include <algorithm>
#include <filesystem>

#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/train/checkpointer.h"
#include "mirrored/train/run_directory.h"

namespace mirrored::app {
namespace fs = std::filesystem;
namespace {

// Every float of a checkpoint in one vector (parameters, buffers, optimizer state), in the
// order the model lays them out: the same on every replica.
std::vector<float> flatten(const io::Checkpoint& checkpoint) {
  std::vector<float> values;
  for (const auto* tensors : {&checkpoint.params, &checkpoint.buffers, &checkpoint.optimizer_state})
    for (const auto& tensor : *tensors) values.insert(values.end(), tensor.values.begin(), tensor.values.end());
  return values;
}

void unflatten(const std::vector<float>& values, io::Checkpoint& checkpoint) {
  size_t at = 0;
  for (auto* tensors : {&checkpoint.params, &checkpoint.buffers, &checkpoint.optimizer_state})
    for (auto& tensor : *tensors) {
      std::copy_n(values.begin() + static_cast<std::ptrdiff_t>(at), tensor.values.size(), tensor.values.begin());
      at += tensor.values.size();
    }
  MIRRORED_CHECK(at == values.size(), "recovered state holds ", values.size(), " values, the model ", at);
}

std::string describe_lost(const distribute::Membership& membership) {
  std::string text;
  for (const auto& lost : membership.lost)
    text += str_cat(text.empty() ? "" : ", ", "rank ", lost.rank, " (", lost.host, ")");
  return text.empty() ? "no rank" : text;
}

}  // namespace

Recovery recover_after_failure(const train::TrainConfig& config, distribute::Runtime& runtime,
                               const std::optional<io::Checkpoint>& snapshot) {
  Recovery recovery;
  recovery.membership = runtime.shrink_after_failure();
  comm::Communicator& world = runtime.world();
  const bool chief = world.rank() == 0;

  // The last completed step: the most any survivor finished. A survivor that completed the
  // interrupted step's all-reduce before the failure reached it holds that step's update,
  // which is the one every replica would have applied.
  const auto steps = world.allgather_value<int64_t>(snapshot ? snapshot->step : -1);
  const int64_t step = *std::max_element(steps.begin(), steps.end());
  const bool chief_has_state = steps[0] >= 0;
  std::string path;
  if (step >= 0 && chief_has_state) {
    const int donor = static_cast<int>(std::find(steps.begin(), steps.end(), step) - steps.begin());
    io::Checkpoint state;
    if (chief) state = *snapshot;
    if (donor != 0) {
      std::vector<float> values;
      int64_t counters[2] = {0, 0};
      if (world.rank() == donor) {
        values = flatten(*snapshot);
        counters[0] = static_cast<int64_t>(values.size());
        counters[1] = snapshot->optimizer_steps;
      }
      world.broadcast(counters, 2, donor);
      values.resize(static_cast<size_t>(counters[0]));
      world.broadcast(values.data(), values.size(), donor);
      if (chief) {
        unflatten(values, state);
        state.step = step;
        state.epoch = step / state.steps_per_epoch;
        state.step_in_epoch = step % state.steps_per_epoch;
        state.optimizer_steps = counters[1];
      }
    }
    // The chief writes it like any checkpoint (atomic; `checkpoint.keep` newest kept).
    const std::string dir = train::checkpoint_dir(config);
    path = (fs::path(dir) / train::checkpoint_file_name(step)).string();
    if (chief) {
      std::error_code error;
      fs::create_directories(dir, error);
      if (error)
        throw Error(ExitCode::kCheckpoint, str_cat("cannot create checkpoint directory '", dir, "': ", error.message()));
      io::write_checkpoint(path, state);
      const auto all = train::list_checkpoints(dir);
      for (size_t i = static_cast<size_t>(config.checkpoint_keep); i < all.size(); ++i) fs::remove(all[i], error);
    }
    world.barrier();  // the file exists before anyone resumes from it
  } else {
    // No state survived in memory where the chief can write it (the failure came while a
    // Trainer was being built): the newest checkpoint on disk is the way on.
    chief_info("on_failure = shrink: no replica state to recover in memory; resuming from the newest checkpoint");
  }
  recovery.step = std::max<int64_t>(step, 0);
  recovery.checkpoint = path;

  const int survivors = recovery.membership.world_size;
  const std::string lost = describe_lost(recovery.membership);
  const std::string saved = path.empty() ? "the newest checkpoint in " + train::checkpoint_dir(config)
                                         : "checkpoint " + path;
  if (survivors < config.shrink_min_replicas)
    throw Error(ExitCode::kTooFewReplicas,
                str_cat("lost ", lost, ": ", survivors, " replica(s) left, fewer than shrink.min_replicas = ",
                        config.shrink_min_replicas, "; ", saved, " holds step ", recovery.step,
                        ". Start the job again at full size to resume from it (exit ",
                        static_cast<int>(ExitCode::kTooFewReplicas), ")"),
                true);
  // Fast mode splits the batch evenly; invariant mode's virtual replicas may sit unevenly.
  if (config.reduction == distribute::Reduction::kFast && config.batch_size % survivors != 0)
    throw Error(ExitCode::kTooFewReplicas,
                str_cat("lost ", lost, ": batch_size = ", config.batch_size, " does not split evenly over the ",
                        survivors, " surviving replica(s); ", saved, " holds step ", recovery.step,
                        ". Start the job again with a world size that divides it to resume from it (exit ",
                        static_cast<int>(ExitCode::kTooFewReplicas), ")"),
                true);
  chief_info(str_cat("lost ", lost, ": going on with ", survivors, " replica(s) from step ", recovery.step,
                     " (rank 0, the chief, is now on ", runtime.cluster().host(), ")"));
  return recovery;
}

void MembershipReporter::on_step_end(train::TrainContext& ctx, const train::StepEnd&) {
  if (reported_) return;
  reported_ = true;
  const double seconds = since_failure_.seconds();
  std::vector<io::JsonRecord> lost;
  for (const auto& rank : recovery_.membership.lost)
    lost.push_back({{"rank", static_cast<int64_t>(rank.rank)}, {"host", rank.host}});
  ctx.run_dir.log_metrics({{"kind", std::string("membership")},
                           {"step", recovery_.step},
                           {"world_size", static_cast<int64_t>(recovery_.membership.world_size)},
                           {"lost", io::to_json_array(lost)},
                           {"recovery_s", seconds}});
  chief_info(str_cat("membership: ", recovery_.membership.world_size, " replica(s) after losing ",
                     describe_lost(recovery_.membership), "; first step after recovery done ",
                     fixed(seconds, 2), " s after the failure was detected"));
}

}  // namespace mirrored::app
