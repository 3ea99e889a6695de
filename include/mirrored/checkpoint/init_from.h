#pragma once
// init_from = FILE.safetensors: a new run starts from a gpt's parameters in GPT-2's layout
// (checkpoint/gpt2_weights.h; `mirrored export` writes such files, and so does Hugging Face's
// save_pretrained) instead of random ones. A resumed run takes its checkpoint instead.
#include "mirrored/config/config.h"
#include "mirrored/distribute/distributed_model.h"
#include "mirrored/distribute/strategy.h"

namespace mirrored::checkpoint {

// Collective. The chief reads the file and broadcasts the parameters; a file that does not
// fit the model (missing, truncated, another shape) is an InputError (kUsage) on every
// rank, naming the file and the first tensor that does not fit.
void initialize_from_file(const config::TrainConfig& config, distribute::MirroredStrategy& strategy,
                          distribute::DistributedModel& model);

}  // namespace mirrored::checkpoint
