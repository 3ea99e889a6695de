#include "mirrored/train/checkpointer.h"

#include <filesystem>
#include <functional>
#include <utility>

#include "mirrored/checkpoint/checkpoint_writer.h"
#include "mirrored/checkpoint/resume_policy.h"
#include "mirrored/checkpoint/run_directory.h"
#include "mirrored/core/host_copy.h"
#include "mirrored/core/log.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/train/non_finite_guard.h"

namespace mirrored::train {
namespace fs = std::filesystem;
namespace {

// Entry i's buffer of a spent checkpoint (CheckpointWriter::take_spent), moved out for
// refilling, or a new one where it has fewer entries.
std::vector<float> spent_buffer(std::vector<io::CheckpointTensor>& spent, size_t i) {
  return i < spent.size() ? std::move(spent[i].values) : std::vector<float>{};
}

// `tensor`'s values in `spent`'s buffer i.
std::vector<float> host_values(const Tensor& tensor, std::vector<io::CheckpointTensor>& spent, size_t i) {
  std::vector<float> values = spent_buffer(spent, i);
  copy_to_host(tensor, values);
  return values;
}

void broadcast_into(comm::Communicator& comm, std::vector<float>& values, Tensor& target) {
  values.resize(static_cast<size_t>(target.numel()));
  comm.broadcast(values.data(), values.size(), 0);
  const Tensor host = Tensor::from(values, target.shape());
  kernels::copy(host, target);
}

// What a checkpoint must fit to continue this run (checkpoint/resume_policy.h).
checkpoint::ResumeTarget resume_target(TrainContext& ctx) {
  checkpoint::ResumeTarget run{ctx.config, ctx.model.parameters(), ctx.optimizer.name(), {}, ctx.steps_per_epoch,
                               ctx.total_steps};
  for (const auto& entry : ctx.optimizer.state()) run.optimizer_state.push_back(entry.first);
  return run;
}

// The background checkpoint of `step`: its parameters and, with `state_in_snapshot`, its
// optimizer state taken by the writer's snapshot (on a GPU queued for copying, on the CPU
// held for the writer thread to read); everything else (the running statistics, which the
// next forward changes, and sharded state, gathered by a collective) is a host copy already.
io::Checkpoint snapshot_for_writer(TrainContext& ctx, int64_t step, std::vector<io::CheckpointTensor> gathered_state,
                                   bool state_in_snapshot, io::Checkpoint spent) {
  std::vector<io::CheckpointTensor> spent_state = std::move(spent.optimizer_state);
  io::Checkpoint checkpoint = capture_checkpoint(ctx, step, ParameterValues::kLater, std::move(spent));
  std::vector<Tensor> tensors{ctx.model.parameters().flat_params()};
  if (state_in_snapshot) {
    for (const auto& [name, tensor] : ctx.optimizer.state()) {
      tensors.push_back(tensor->reshape(Shape{tensor->numel()}));
      gathered_state.push_back({name, {tensor->numel()}, spent_buffer(spent_state, gathered_state.size())});
    }
  }
  checkpoint.optimizer_state = std::move(gathered_state);
  ctx.checkpoints->device_snapshot().take(tensors);
  return checkpoint;
}

// On the writer thread: waits for the device snapshot's copies and puts their values into
// the checkpoint snapshot_for_writer() made (tensor 0 the flat parameters, then each state
// tensor), then releases the snapshot's hold on CPU tensors (the next update need not copy
// them).
std::function<void(io::Checkpoint&)> complete_from_snapshot(const TrainContext& ctx,
                                                            checkpoint::CheckpointWriter& writer, bool state_in_snapshot) {
  std::vector<std::pair<int64_t, int64_t>> params;  // offset and size in the flat parameters
  const nn::ParameterArena& arena = ctx.model.parameters();
  for (size_t i = 0; i < arena.size(); ++i) params.emplace_back(arena.info(i).offset, arena.param(i).numel());
  return [&snapshot = writer.device_snapshot(), params = std::move(params), state_in_snapshot](io::Checkpoint& checkpoint) {
    // Also when a copy throws: the update then copies what it needs itself.
    struct Release {
      checkpoint::DeviceSnapshot& snapshot;
      ~Release() { snapshot.release(); }
    } release{snapshot};
    // Checksummed as copied: the file's CRC joins these instead of reading 10 MB again.
    for (size_t i = 0; i < params.size(); ++i) {
      io::CheckpointTensor& param = checkpoint.params[i];
      snapshot.copy_values(0, params[i].first, params[i].second, param.values, &param.values_crc);
    }
    if (!state_in_snapshot) return;
    for (size_t k = 0; k < checkpoint.optimizer_state.size(); ++k) {
      io::CheckpointTensor& state = checkpoint.optimizer_state[k];
      snapshot.copy_values(1 + k, state.values, &state.values_crc);
    }
  };
}

}  // namespace

std::vector<io::CheckpointTensor> gather_optimizer_state(TrainContext& ctx, std::vector<io::CheckpointTensor> spent) {
  comm::Communicator& comm = ctx.strategy.communicator();
  const distribute::ShardPlan& plan = ctx.model.shard_plan();
  std::vector<io::CheckpointTensor> gathered;
  for (const auto& [name, tensor] : ctx.optimizer.state()) {
    std::vector<float> logical = spent_buffer(spent, gathered.size());
    plan.gather_to_chief(*tensor, comm, logical);
    gathered.push_back({name, {plan.numel()}, std::move(logical)});
  }
  return gathered;
}

io::Checkpoint capture_checkpoint(const TrainContext& ctx, int64_t step, ParameterValues values, io::Checkpoint spent) {
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
  for (size_t i = 0; i < arena.size(); ++i) {
    // kLater: an empty buffer that keeps its capacity for the device snapshot's values.
    std::vector<float> host = spent_buffer(spent.params, i);
    if (values == ParameterValues::kNow) copy_to_host(arena.param(i), host);
    else host.clear();
    checkpoint.params.push_back({arena.info(i).name, arena.info(i).shape, std::move(host)});
  }
  // Running statistics are the same on every replica here (synchronised before each save).
  for (size_t i = 0; i < arena.num_buffers(); ++i)
    checkpoint.buffers.push_back(
        {arena.buffer_info(i).name, arena.buffer_info(i).shape, host_values(arena.buffer(i), spent.buffers, i)});
  // The optimizer state comes from gather_optimizer_state() (every rank takes part).
  return checkpoint;
}

ResumePoint restore_checkpoint(TrainContext& ctx) {
  comm::Communicator& comm = ctx.strategy.communicator();
  checkpoint::ResumeChoice choice;
  if (ctx.strategy.is_chief()) {
    // Leftovers of a write that a crash interrupted: never valid, never renamed into place.
    // Only the checkpoint writer's own, and only those no live writer holds.
    io::remove_abandoned_checkpoint_temporaries(checkpoint::checkpoint_dir(ctx.config));
    if (ctx.config.resume == config::ResumeMode::kNever) {
      // Starting over here: an earlier run's checkpoints (later steps among them) would
      // otherwise be taken for this run's by the next resume, or outlive its own in `keep`,
      // and its TensorBoard events would draw its curves into this run's.
      const std::string removed = ctx.run_dir.clear_earlier_run();
      if (!removed.empty())
        chief_info(str_cat("resume = never: removed the earlier run in '", ctx.run_dir.path(), "' (", removed, ")"));
    }
    choice = checkpoint::choose_resume(resume_target(ctx));
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
    // reduction = invariant sums in the same order at any world size: the same bits.
    if (checkpoint.world_size != ctx.strategy.num_replicas_in_sync() &&
        ctx.config.reduction == distribute::Reduction::kInvariant)
      chief_info(str_cat("checkpoint '", choice.source, "' was written by ", checkpoint.world_size,
                         " replica(s), this run has ", ctx.strategy.num_replicas_in_sync(),
                         ": with reduction = invariant it continues the same run bit for bit"));
    else if (checkpoint.world_size != ctx.strategy.num_replicas_in_sync())
      rank_warning(str_cat("checkpoint '", choice.source, "' was written by ", checkpoint.world_size,
                           " replica(s), this run has ", ctx.strategy.num_replicas_in_sync(),
                           ": same global batch and data order, so it continues the same run up to float "
                           "summation order (not bit-identically)"));
    checkpoint::warn_about_config_changes(choice.source, checkpoint.config, ctx.config);
  }
  return {counters[0], comm.broadcast_string(choice.source, 0)};
}

void Checkpointer::on_log(TrainContext& ctx, const LogPoint& point) {
  if (checkpoint::save_at_log_point(ctx.config, point.step, ctx.steps_per_epoch, ctx.total_steps,
                                    ctx.stop_training)) {
    // One set of running statistics to save, as at epoch ends (a collective: every rank is
    // here). Without sync batch norm the replicas' statistics drift apart within an epoch;
    // their moving averages are linear, so averaging them here and again at the epoch end
    // gives that epoch end's values up to rounding.
    ctx.model.synchronize_buffers();
    save(ctx, point.step);
  }
}

void Checkpointer::on_epoch_end(TrainContext& ctx, const EpochEnd& end) {
  if (checkpoint::save_at_epoch_end(ctx.config, end.step, end.epoch, ctx.steps_per_epoch, ctx.total_steps,
                                    ctx.stop_training))
    save(ctx, end.step);
}

void Checkpointer::on_train_end(TrainContext& ctx, const TrainSummary&) {
  if (ctx.checkpoints) ctx.checkpoints->wait();
}

void Checkpointer::save(TrainContext& ctx, int64_t step, Wait wait) {
  // Every rank: it may end the run, and corrects the optimizer's steps.
  // The losses hold the epoch of `step` (saved as that step ends).
  if (ctx.guard)
    settle_guard(*ctx.guard, ctx.optimizer, *ctx.losses, (step - 1) / ctx.steps_per_epoch * ctx.steps_per_epoch,
                 ctx.steps_per_epoch);
  // One copy of the state in host memory at a time: a background write still in flight
  // ends before this snapshot is taken (the step would wait for it at the write anyway).
  const bool background = checkpoint::CheckpointWriter::background_writes(ctx.config);
  if (background && ctx.strategy.is_chief()) ctx.checkpoints->wait();
  // Background: the parameters (and unsharded optimizer state, which only the chief's copy
  // makes: no collective) leave the step to the writer's snapshot: on a GPU copied on a side
  // stream, on the CPU read by the writer thread while the next forward and backward run.
  const bool state_in_snapshot = background && !ctx.model.shard_plan().sharded();
  // The chief refills the host buffers of the checkpoint it wrote last: no allocation, and
  // no page faults on fresh memory, in the step.
  io::Checkpoint spent = ctx.strategy.is_chief() ? ctx.checkpoints->take_spent() : io::Checkpoint{};
  std::vector<io::CheckpointTensor> optimizer_state;
  if (!state_in_snapshot) optimizer_state = gather_optimizer_state(ctx, std::move(spent.optimizer_state));  // collective
  if (!ctx.strategy.is_chief()) return;
  const std::string path = ctx.checkpoints->path(step);
  if (background) {
    ctx.checkpoints->write_in_background(
        snapshot_for_writer(ctx, step, std::move(optimizer_state), state_in_snapshot, std::move(spent)),
        complete_from_snapshot(ctx, *ctx.checkpoints, state_in_snapshot));
    if (wait == Wait::kUntilDurable) ctx.checkpoints->wait();
  } else {
    io::Checkpoint checkpoint = capture_checkpoint(ctx, step, ParameterValues::kNow, std::move(spent));
    checkpoint.optimizer_state = std::move(optimizer_state);
    ctx.checkpoints->write(checkpoint);
    ctx.checkpoints->keep_spent(std::move(checkpoint));
  }
  chief_verbose(str_cat("  checkpoint ", path, wait == Wait::kNo && ctx.checkpoints->writing() ? " (writing)" : ""));
}

}  // namespace mirrored::train
