#include "mirrored/checkpoint/resume_policy.h"

#include <filesystem>

#include "mirrored/checkpoint/checkpoint_store.h"
#include "mirrored/config/model_identity.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"

namespace mirrored::checkpoint {
namespace fs = std::filesystem;
namespace {

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

// A checkpoint of another model, told from the configuration it records (kind and shape
// keys), before any tensor is compared: "'FILE' holds an mlp model (...); this run builds a
// gpt (...)", or "" (also for a file written before checkpoints held their configuration,
// whose tensors misfit() compares).
std::string other_model(const ResumeTarget& run, const io::Checkpoint& checkpoint, const std::string& source) {
  if (checkpoint.config.empty()) return "";
  try {
    const config::TrainConfig stored = config::parse_config_text(
        checkpoint.config, "the configuration stored in the checkpoint", /*ignore_unknown_keys=*/true);
    return config::model_mismatch(source, stored, "this run builds", run.config);
  } catch (const InputError&) {
    return "";  // unreadable: misfit() compares the tensors themselves
  }
}

// Why `checkpoint` cannot continue this run, or "" when it can.
std::string misfit(const ResumeTarget& run, const io::Checkpoint& checkpoint) {
  // A fast run's parameters are not any invariant run's, nor the reverse: continuing one
  // as the other would end with a model that neither mode can reproduce.
  if (const distribute::Reduction stored = stored_reduction(checkpoint); stored != run.config.reduction)
    return str_cat("it was written with reduction = ", distribute::reduction_name(stored), ", this run has reduction = ",
                   distribute::reduction_name(run.config.reduction),
                   "; a run keeps its reduction mode (set reduction = ", distribute::reduction_name(stored),
                   " to continue it)");
  if (checkpoint.steps_per_epoch != run.steps_per_epoch)
    return str_cat("it was written with ", checkpoint.steps_per_epoch, " steps per epoch, this run has ",
                   run.steps_per_epoch, " (batch_size or data.train differ)");
  if (checkpoint.optimizer != run.optimizer)
    return str_cat("it holds the state of optimizer ", checkpoint.optimizer, ", this run uses ", run.optimizer);
  const auto& infos = run.parameters.infos();
  if (checkpoint.params.size() != infos.size())
    return str_cat("it holds ", checkpoint.params.size(), " parameters, the model has ", infos.size());
  for (size_t i = 0; i < infos.size(); ++i) {
    const auto& stored = checkpoint.params[i];
    if (stored.name != infos[i].name || stored.shape != infos[i].shape)
      return str_cat("parameter ", i, " is ", stored.name, " ", shape_str(stored.shape), " in the file, the model has ",
                     infos[i].name, " ", shape_str(infos[i].shape));
  }
  const nn::ParameterArena& arena = run.parameters;
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
  const auto& state = run.optimizer_state;
  if (checkpoint.optimizer_state.size() != state.size())
    return str_cat("it holds ", checkpoint.optimizer_state.size(), " optimizer state tensors, ", run.optimizer,
                   " has ", state.size());
  for (size_t i = 0; i < state.size(); ++i) {
    const auto& stored = checkpoint.optimizer_state[i];
    if (stored.name != state[i] || static_cast<int64_t>(stored.values.size()) != arena.numel())
      return str_cat("optimizer state ", stored.name, " holds ", stored.values.size(), " values, expected ",
                     state[i], " with ", arena.numel());
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

// resume = auto continues only the run that the directory holds: a new run given an old
// run's --out must not silently pick up its checkpoints.
std::string refuse_other_run(const config::TrainConfig& config, const std::string& source,
                             const std::vector<std::string>& changes) {
  return str_cat("out = '", config.out, "' holds a run with another configuration (", join(changes, ", "),
                 "; newest checkpoint '", source, "'), and resume = auto continues only the same run. "
                 "Give this run its own directory (--out DIR), or start over here with --resume never "
                 "(removing the earlier run); to continue the old run with the new values anyway, "
                 "name its checkpoint: --resume ", checkpoint_dir(config));
}

}  // namespace

void warn_about_config_changes(const std::string& source, const std::string& stored,
                               const config::TrainConfig& current) {
  const auto changes = config_changes(source, stored, current);
  if (!changes.empty())
    rank_warning(str_cat("resuming from '", source, "' with a changed configuration (", join(changes, ", "),
                         "): the run will not reproduce the one that wrote it"));
}

ResumeChoice choose_resume(const ResumeTarget& run) {
  const std::string& resume = run.config.resume_path;  // resume = a checkpoint file or directory
  ResumeChoice choice;
  if (run.config.resume == config::ResumeMode::kNever) return choice;
  std::vector<std::string> candidates;
  std::string where;
  if (run.config.resume == config::ResumeMode::kAuto) {
    where = checkpoint_dir(run.config);
    candidates = list_checkpoints(where);
    if (candidates.empty()) return choice;  // a new run
  } else if (fs::is_directory(resume)) {
    where = fs::is_directory(fs::path(resume) / "checkpoints") ? (fs::path(resume) / "checkpoints").string() : resume;
    candidates = list_checkpoints(where);
    if (candidates.empty()) {
      choice.status = 2;
      choice.message = str_cat("resume = '", resume, "': no checkpoint files (ckpt-<step>.h5) in '", where, "'");
      return choice;
    }
  } else {
    candidates = {resume};
  }
  std::string problem;  // the last candidate's
  bool names_file = false;
  for (size_t i = 0; i < candidates.size(); ++i) {
    try {
      io::Checkpoint checkpoint = io::read_checkpoint(candidates[i]);
      if (run.config.resume == config::ResumeMode::kAuto) {
        const auto changes = config_changes(candidates[i], checkpoint.config, run.config);
        if (!changes.empty()) {
          choice.status = 3;
          choice.message = refuse_other_run(run.config, candidates[i], changes);
          return choice;
        }
        // Its last step saved and final.h5 written: nothing to do (more epochs or max_steps
        // extend it). Without final.h5 the end was interrupted, and the resume completes it.
        const std::string final_file = (fs::path(run.config.out) / "final.h5").string();
        if (checkpoint.step >= run.total_steps && fs::exists(final_file) && misfit(run, checkpoint).empty()) {
          choice.status = 4;
          choice.message = str_cat("out = '", run.config.out, "': this run is finished (step ", checkpoint.step,
                                   " of ", run.total_steps, ", '", final_file, "'); nothing to train. Raise epochs "
                                   "or max_steps to extend it, or start a new run with --out DIR or --resume never");
          return choice;
        }
      }
      problem = other_model(run, checkpoint, candidates[i]);
      if (problem.empty()) {
        problem = misfit(run, checkpoint);
        if (problem.empty()) {
          choice.status = 1;
          choice.source = candidates[i];
          choice.checkpoint = std::move(checkpoint);
          return choice;
        }
        problem = str_cat("checkpoint '", candidates[i], "': does not fit this run: ", problem);
      }
    } catch (const Error& e) {
      problem = e.what();
    }
    // Each problem is told once: a warning when an older checkpoint is tried next, else in
    // the error below.
    // (A model mismatch names its file first: "'FILE' holds ...".)
    names_file = problem.rfind(str_cat("'", candidates[i], "'"), 0) == 0;
    if (i + 1 < candidates.size())
      rank_warning(str_cat("skipping", names_file ? ": " : " ", problem, "; trying the previous one, '",
                           candidates[i + 1], "'"));
  }
  choice.status = 2;
  choice.message =
      candidates.size() == 1 && where.empty()
          ? (names_file ? str_cat("resume: ", problem) : str_cat("resume = '", resume, "': ", problem))
          : str_cat("resume = ", run.config.resume == config::ResumeMode::kAuto ? std::string("auto") : resume,
                    ": none of the ", candidates.size(), " checkpoint(s) in '", where, "' is usable (",
                    candidates.size() > 1 ? "the oldest: " : "", problem,
                    "); remove them or set resume = never to start over");
  return choice;
}

}  // namespace mirrored::checkpoint
