#pragma once
// Which checkpoint a run resumes from (the `resume` key), decided by the chief from the
// files alone; train/checkpointer.h broadcasts the choice and the state to every replica.
//   resume = never  a fresh start;
//   resume = auto   the newest checkpoint in <out>/checkpoints that reads, verifies and fits
//                   this run, each one skipped named in a warning; a newest checkpoint
//                   written with other values of the keys that change the result is another
//                   run's (refused, naming them and the ways out); one at the run's last
//                   step beside a final.h5 is a finished run;
//   resume = PATH   that file, or the newest fitting one in that directory (or in its
//                   checkpoints/), whatever configuration wrote it.
#include <cstdint>
#include <string>
#include <vector>

#include "mirrored/config/config.h"
#include "mirrored/io/checkpoint_file.h"
#include "mirrored/nn/parameter_arena.h"

namespace mirrored::checkpoint {

// What a checkpoint must fit to continue a run.
struct ResumeTarget {
  const config::TrainConfig& config;
  const nn::ParameterArena& parameters;      // names and shapes of parameters and buffers
  std::string optimizer;                     // the optimizer's name ("sgd", "adam", "adamw")
  std::vector<std::string> optimizer_state;  // its state tensors' names, in order
  int64_t steps_per_epoch = 0;
  int64_t total_steps = 0;
};

struct ResumeChoice {
  // 0: a fresh start; 1: resume from `checkpoint` (read from `source`); 2: no usable
  // checkpoint where one was expected (`message`); 3: another run's directory (`message`);
  // 4: the run is finished (`message`).
  int64_t status = 0;
  std::string message;
  std::string source;
  io::Checkpoint checkpoint;
};

// The chief's choice for `run`: reads the candidate files (warning about each one skipped).
ResumeChoice choose_resume(const ResumeTarget& run);

// A run resumed from a named checkpoint with other hyper-parameters is allowed (like
// changing lr by hand), but it no longer reproduces the run that wrote it: a warning naming
// the keys in which `current` differs from `stored` (the configuration in `source`).
void warn_about_config_changes(const std::string& source, const std::string& stored,
                               const config::TrainConfig& current);

}  // namespace mirrored::checkpoint
