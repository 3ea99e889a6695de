#pragma once
// The run directory: config.ini (resolved configuration), metrics.jsonl and final.h5.
// Which folder that is (a subfolder of `out` per configuration or Slurm job, or --out
// itself) is decided by config::resolve_run_directory.
// Only the chief writes; the others hold an inactive instance. config.ini is written when
// training begins (open_metrics), after the resume decision, so a run that is refused
// (another configuration in the same directory) leaves the stored one as it was. The
// directory itself is created then too, not before: a start that fails (bad data, a refused
// resume, a model that does not fit) leaves no empty run directory behind.
#include <cstdint>
#include <string>

#include "mirrored/config/config.h"
#include "mirrored/io/jsonl_writer.h"

namespace mirrored::checkpoint {

class RunDirectory {
 public:
  RunDirectory(const config::TrainConfig& config, bool is_chief);
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const;
  void log_metrics(const io::JsonRecord& record);  // no-op off the chief
  // Opens metrics.jsonl (otherwise the first log_metrics does): a new file, or, for a run
  // resumed after `resumed_step` steps, the existing one cut back to the records up to that
  // step, since the resumed run logs the later ones again. Chief only; a no-op elsewhere.
  // Writes config.ini first. Both files are rewritten whole or not at all
  // (core/file_replacement.h): a failed write (a full disk) is Error(kWriteFailed) and leaves
  // the old file as it was.
  void open_metrics(int64_t resumed_step = 0);
  // resume = never: removes what an earlier run left here, so that nothing of it mixes with
  // this one: its checkpoints (checkpoints/ckpt-*.h5), TensorBoard event files
  // (tensorboard/events.out.tfevents.*), metrics.jsonl, final.h5 and flight-recorder dumps
  // (trace/rank-*.jsonl). Only regular files of those names (no link is followed), and
  // nothing else: files a user put in the directory stay. Returns what it removed, as
  // "N checkpoint(s), ..." for the chief's message (empty: nothing). Chief only.
  std::string clear_earlier_run();

 private:
  void create() const;  // the directory, with its parents (Error kUsage naming it when it cannot be)

  std::string path_;
  std::string config_ini_;
  bool active_;
  io::JsonlWriter metrics_;
};

}  // namespace mirrored::checkpoint
