#include "mirrored/train/checkpointer.h"

#include <filesystem>

#include "mirrored/core/log.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/train/non_finite_guard.h"

namespace mirrored::train {
namespace fs = std::filesystem;
namespace {

std::vector<float> flat_values(const Tensor& tensor) { return tensor.to_vector(); }

// The reduction mode the run that wrote `checkpoint` used (fast before the key existed).
distribute::Reduction stored_reduction(const io::Checkpoint& checkpoint) {
  if (checkpoint.config.empty()) return distribute::Reduction::kFast;
  try {
    return config::parse_config_text(checkpoint.config, "the configuration stored in the checkpoint",
                             /*ignore_unknown_keys=*/true)
        .reduction;
  } catch (const InputError&) {
    return distribute::Reduction::kFast;  // config_changes warns about unreadable text
  }
}

// Why `checkpoint` cannot continue this run, or "" when it can.
std::string misfit(const TrainContext& ctx, const io::Checkpoint& checkpoint) {
  // A fast run's parameters are not any invariant run's, nor the reverse: continuing one
  // as the other would end with a model that neither mode can reproduce.
  if (const distribute::Reduction stored = stored_reduction(checkpoint); stored != ctx.config.reduction)
    return str_cat("it was written with reduction = ", distribute::reduction_name(stored), ", this run has reduction = ",
                   distribute::reduction_name(ctx.config.reduction),
                   "; a run keeps its reduction mode (set reduction = ", distribute::reduction_name(stored),
                   " to continue it)");
  if (checkpoint.steps_per_epoch != ctx.steps_per_epoch)
    return str_cat("it was written with ", checkpoint.steps_per_epoch, " steps per epoch, this run has ",
                   ctx.steps_per_epoch, " (batch_size or data.train differ)");
  if (checkpoint.optimizer != ctx.optimizer.name())
    return str_cat("it holds the state of optimizer ", checkpoint.optimizer, ", this run uses ", ctx.optimizer.name());
  const auto& infos = ctx.model.parameters().infos();
  if (checkpoint.params.size() != infos.size())
    return str_cat("it holds ", checkpoint.params.size(), " parameters, the model has ", infos.size());
  for (size_t i = 0; i < infos.size(); ++i) {
    const auto& stored = checkpoint.params[i];
    if (stored.name != infos[i].name || stored.shape != infos[i].shape)
      return str_cat("parameter ", i, " is ", stored.name, " ", shape_str(stored.shape), " in the file, the model has ",
                     infos[i].name, " ", shape_str(infos[i].shape));
  }
  const nn::ParameterArena& arena = ctx.model.parameters();
  if (checkpoint.buffers.size() != arena.num_buffers())
    return str_cat("it holds ", checkpoint.buffers.size(), " buffers (batch norm running statistics), the model has ",
                   arena.num_buffers(), checkpoint.format_version < 2 ? " (format version 1 did not save them)" : "");
  for (size_t i = 0; i < arena.num_buffers(); ++i) {
    const auto& stored = checkpoint.buffers[i];
    const auto& info = arena.buffer_info(i);
    if (stored.name != info.name || stored.shape != info.shape)
      return str_cat("buffer ", i, " is ", stored.name, " ", shape_str(stored.shape), " in the file, the model has ",
                     info.name, " ", shape_str(info.shape));
  }
  auto state = ctx.optimizer.state();
  if (checkpoint.optimizer_state.size() != state.size())
    return str_cat("it holds ", checkpoint.optimizer_state.size(), " optimizer state tensors, ", ctx.optimizer.name(),
                   " has ", state.size());
  for (size_t i = 0; i < state.size(); ++i) {
    const auto& stored = checkpoint.optimizer_state[i];
    if (stored.name != state[i].first || static_cast<int64_t>(stored.values.size()) != arena.numel())
      return str_cat("optimizer state ", stored.name, " holds ", stored.values.size(), " values, expected ",
                     state[i].first, " with ", arena.numel());
  }
  return "";
}

// The values that change the result (the option table's flag) in which `current` differs
// from the configuration stored in checkpoint `source`, read through the same table; empty
// (with a warning) when the stored text cannot be compared.
std::vector<std::string> config_changes(const std::string& source, const std::string& stored,
                                        const config::TrainConfig& current) {
  if (stored.empty()) return {};  // written before checkpoints held their configuration
  try {
    return config::result_changes(
        config::parse_config_text(stored, str_cat("the configuration stored in '", source, "'"),
                                  /*ignore_unknown_keys=*/true),
        current);
  } catch (const InputError& e) {
    rank_warning(str_cat("cannot compare the configuration of '", source, "' with this run's: ", e.what()));
    return {};
  }
}

// A run resumed from a named checkpoint with other hyper-parameters is allowed (like
// changing lr by hand), but it no longer reproduces the original run: say so.
void warn_about_config_changes(const std::string& source, const std::string& stored,
                               const config::TrainConfig& current) {
  const auto changes = config_changes(source, stored, current);
  if (!changes.empty())
    rank_warning(str_cat("resuming from '", source, "' with a changed configuration (", join(changes, ", "),
                         "): the run will not reproduce the one that wrote it"));
}

// resume = auto continues only the run that the directory holds: a new run given an old
// run's --out must not silently pick up its checkpoints.
std::string refuse_other_run(const config::TrainConfig& config, const std::string& source,
                             const std::vector<std::string>& changes) {
  return str_cat("out = '", config.out, "' holds a run with another configuration (", join(changes, ", "),
                 "; newest checkpoint '", source, "'), and resume = auto continues only the same run. "
                 "Give this run its own directory (--out DIR), or start over here with --resume never "
                 "(removing its checkpoints); to continue the old run with the new values anyway, "
                 "name its checkpoint: --resume ", checkpoint::checkpoint_dir(config));
}

struct Choice {
  // 0: fresh start, 1: restore `checkpoint`, 2: fail with `message` (no usable checkpoint),
  // 3: fail with `message` (another run's directory), 4: the run is finished (`message`)
  int64_t status = 0;
  std::string message;
  std::string source;
  io::Checkpoint checkpoint;
};

Choice choose_on_chief(const TrainContext& ctx) {
  const std::string& resume = ctx.config.resume_path;  // resume = a checkpoint file or directory
  Choice choice;
  if (ctx.config.resume == config::ResumeMode::kNever) return choice;
  std::vector<std::string> candidates;
  std::string where;
  if (ctx.config.resume == config::ResumeMode::kAuto) {
    where = checkpoint::checkpoint_dir(ctx.config);
    candidates = checkpoint::list_checkpoints(where);
    if (candidates.empty()) return choice;  // a new run
  } else if (fs::is_directory(resume)) {
    where = fs::is_directory(fs::path(resume) / "checkpoints") ? (fs::path(resume) / "checkpoints").string() : resume;
    candidates = checkpoint::list_checkpoints(where);
    if (candidates.empty()) {
      choice.status = 2;
      choice.message = str_cat("resume = '", resume, "': no checkpoint files (ckpt-<step>.h5) in '", where, "'");
      return choice;
    }
  } else {
    candidates = {resume};
  }
  std::vector<std::string> problems;
  for (size_t i = 0; i < candidates.size(); ++i) {
    std::string problem;
    try {
      io::Checkpoint checkpoint = io::read_checkpoint(candidates[i]);
      if (ctx.config.resume == config::ResumeMode::kAuto) {
        const auto changes = config_changes(candidates[i], checkpoint.config, ctx.config);
        if (!changes.empty()) {
          choice.status = 3;
          choice.message = refuse_other_run(ctx.config, candidates[i], changes);
          return choice;
        }
        // Its last step saved and final.h5 written: nothing to do (more epochs or max_steps
        // extend it). Without final.h5 the end was interrupted, and the resume completes it.
        const std::string final_file = (fs::path(ctx.config.out) / "final.h5").string();
        if (checkpoint.step >= ctx.total_steps && fs::exists(final_file) && misfit(ctx, checkpoint).empty()) {
          choice.status = 4;
          choice.message = str_cat("out = '", ctx.config.out, "': this run is finished (step ", checkpoint.step,
                                   " of ", ctx.total_steps, ", '", final_file, "'); nothing to train. Raise epochs "
                                   "or max_steps to extend it, or start a new run with --out DIR or --resume never");
          return choice;
        }
      }
      problem = misfit(ctx, checkpoint);
      if (problem.empty()) {
        choice.status = 1;
        choice.source = candidates[i];
        choice.checkpoint = std::move(checkpoint);
        return choice;
      }
      problem = str_cat("checkpoint '", candidates[i], "': does not fit this run: ", problem);
    } catch (const Error& e) {
      problem = e.what();
    }
    problems.push_back(problem);
    rank_warning(str_cat("skipping ", problem,
                         i + 1 < candidates.size() ? str_cat("; trying the previous one, '", candidates[i + 1], "'")
                                                   : std::string()));
  }
  choice.status = 2;
  choice.message =
      candidates.size() == 1 && where.empty()
          ? str_cat("resume = '", resume, "': ", problems.front())
          : str_cat("resume = ", ctx.config.resume == config::ResumeMode::kAuto ? std::string("auto") : resume,
                    ": none of the ", candidates.size(), " checkpoint(s) in '", where,
                    "' is usable; remove them or set resume = never to start over");
  return choice;
}

void broadcast_into(comm::Communicator& comm, std::vector<float>& values, Tensor& target) {
  values.resize(static_cast<size_t>(target.numel()));
  comm.broadcast(values.data(), values.size(), 0);
  const Tensor host = Tensor::from(values, target.shape());
  kernels::copy(host, target);
}

}  // namespace

std::vector<io::CheckpointTensor> gather_optimizer_state(TrainContext& ctx) {
  comm::Communicator& comm = ctx.strategy.communicator();
  const distribute::ShardPlan& plan = ctx.model.shard_plan();
  std::vector<io::CheckpointTensor> gathered;
  for (const auto& [name, tensor] : ctx.optimizer.state())
    gathered.push_back({name, {plan.numel()}, plan.gather_to_chief(*tensor, comm)});
  return gathered;
}

io::Checkpoint capture_checkpoint(const TrainContext& ctx, int64_t step) {
  io::Checkpoint checkpoint;
  checkpoint.step = step;
  checkpoint.steps_per_epoch = ctx.steps_per_epoch;
  checkpoint.epoch = step / ctx.steps_per_epoch;
  checkpoint.step_in_epoch = step % ctx.steps_per_epoch;
  checkpoint.world_size = ctx.strategy.num_replicas_in_sync();
  checkpoint.optimizer = ctx.optimizer.name();
  checkpoint.optimizer_steps = ctx.optimizer.steps();
  checkpoint.config = config::to_ini(ctx.config);
  const nn::ParameterArena& arena = ctx.model.parameters();
  for (size_t i = 0; i < arena.size(); ++i)
    checkpoint.params.push_back({arena.info(i).name, arena.info(i).shape, flat_values(arena.param(i))});
  // Running statistics are the same on every replica here (synchronised before each save).
  for (size_t i = 0; i < arena.num_buffers(); ++i)
    checkpoint.buffers.push_back(
        {arena.buffer_info(i).name, arena.buffer_info(i).shape, flat_values(arena.buffer(i))});
  // The optimizer state comes from gather_optimizer_state() (every rank takes part).
  return checkpoint;
}

ResumePoint restore_checkpoint(TrainContext& ctx) {
  comm::Communicator& comm = ctx.strategy.communicator();
  Choice choice;
  if (ctx.strategy.is_chief()) {
    // Leftovers of a write that a crash interrupted: never valid, never renamed into place.
    // Only the checkpoint writer's own, and only those no live writer holds.
    io::remove_abandoned_checkpoint_temporaries(checkpoint::checkpoint_dir(ctx.config));
    std::error_code error;
    if (ctx.config.resume == config::ResumeMode::kNever) {
      // Starting over here: an earlier run's checkpoints (later steps among them) would
      // otherwise be taken for this run's by the next resume, or outlive its own in `keep`.
      const auto old = checkpoint::list_checkpoints(checkpoint::checkpoint_dir(ctx.config));
      if (!old.empty())
        chief_info(str_cat("resume = never: removing ", old.size(), " checkpoint(s) of an earlier run in '",
                           checkpoint::checkpoint_dir(ctx.config), "'"));
      for (const auto& path : old) fs::remove(path, error);
    }
    choice = choose_on_chief(ctx);
  }
  comm.broadcast(&choice.status, 1, 0);
  choice.message = comm.broadcast_string(choice.message, 0);
  if (choice.status == 2) throw InputError(choice.message, ExitCode::kCheckpoint);
  if (choice.status == 3) throw InputError(choice.message, ExitCode::kUsage);
  if (choice.status == 4) {
    chief_print(choice.message);
    return {0, "", true};
  }
  if (choice.status == 0) return {};

  const io::Checkpoint& checkpoint = choice.checkpoint;
  int64_t counters[2] = {checkpoint.step, checkpoint.optimizer_steps};
  comm.broadcast(counters, 2, 0);
  nn::ParameterArena& arena = ctx.model.parameters();
  std::vector<float> values;
  if (ctx.strategy.is_chief()) {
    for (const auto& param : checkpoint.params) values.insert(values.end(), param.values.begin(), param.values.end());
  }
  broadcast_into(comm, values, arena.flat_params());
  if (arena.num_buffers() > 0) {
    values.clear();
    if (ctx.strategy.is_chief())
      for (const auto& buffer : checkpoint.buffers) values.insert(values.end(), buffer.values.begin(), buffer.values.end());
    broadcast_into(comm, values, arena.flat_buffers());
  }
  // The file holds the logical (unsharded) layout; each replica keeps its shard of it.
  auto state = ctx.optimizer.state();
  for (size_t i = 0; i < state.size(); ++i) {
    if (ctx.strategy.is_chief()) values = checkpoint.optimizer_state[i].values;
    ctx.model.shard_plan().scatter_from_chief(values, *state[i].second, comm);
  }
  ctx.optimizer.set_steps(counters[1]);

  if (ctx.strategy.is_chief()) {
    chief_info(str_cat("resuming from '", choice.source, "': step ", checkpoint.step, " (epoch ", checkpoint.epoch + 1,
                       ", step ", checkpoint.step_in_epoch, " of ", checkpoint.steps_per_epoch, ")"));
    if (checkpoint.world_size != ctx.strategy.num_replicas_in_sync())
      rank_warning(str_cat("checkpoint '", choice.source, "' was written by ", checkpoint.world_size,
                           " replica(s), this run has ", ctx.strategy.num_replicas_in_sync(),
                           ": same global batch and data order, so it continues the same run up to float "
                           "summation order (not bit-identically)"));
    warn_about_config_changes(choice.source, checkpoint.config, ctx.config);
  }
  return {counters[0], comm.broadcast_string(choice.source, 0)};
}

void Checkpointer::on_log(TrainContext& ctx, const LogPoint& point) {
  // The epoch's last step is saved by on_epoch_end, after its evaluation.
  const bool epoch_ends = point.step % ctx.steps_per_epoch == 0 || point.step >= ctx.total_steps || ctx.stop_training;
  if (checkpoint::checkpoint_step(ctx.config, point.step) && !epoch_ends) {
    // One set of running statistics to save, as at epoch ends (a collective: every rank is
    // here). Without sync batch norm the replicas' statistics drift apart within an epoch;
    // their moving averages are linear, so averaging them here and again at the epoch end
    // gives that epoch end's values up to rounding.
    ctx.model.synchronize_buffers();
    save(ctx, point.step);
  }
}

void Checkpointer::on_epoch_end(TrainContext& ctx, const EpochEnd& end) {
  const config::TrainConfig& config = ctx.config;
  const bool enabled = config.checkpoint_every_steps > 0 || config.checkpoint_every_epochs > 0;
  const bool whole_epoch = end.step % ctx.steps_per_epoch == 0;
  const bool by_epoch =
      whole_epoch && config.checkpoint_every_epochs > 0 && (end.epoch + 1) % config.checkpoint_every_epochs == 0;
  // The last state of a run is always kept, so it can be extended (more epochs) later.
  const bool last = end.step >= ctx.total_steps || ctx.stop_training;
  if (enabled && (by_epoch || checkpoint::checkpoint_step(config, end.step) || last)) save(ctx, end.step);
}

void Checkpointer::save(TrainContext& ctx, int64_t step) {
  // Every rank: it may end the run, and corrects the optimizer's steps.
  // The losses hold the epoch of `step` (saved as that step ends).
  if (ctx.guard)
    settle_guard(*ctx.guard, ctx.optimizer, *ctx.losses, (step - 1) / ctx.steps_per_epoch * ctx.steps_per_epoch,
                 ctx.steps_per_epoch);
  auto optimizer_state = gather_optimizer_state(ctx);  // collective
  if (!ctx.strategy.is_chief()) return;
  io::Checkpoint checkpoint = capture_checkpoint(ctx, step);
  checkpoint.optimizer_state = std::move(optimizer_state);
  const std::string path = checkpoint::write_checkpoint_file(ctx.config, step, checkpoint);
  chief_verbose(str_cat("  checkpoint ", path));
}

}  // namespace mirrored::train
