#pragma once
// init_from = DIR | FILE.safetensors: a new run starts from a gpt's parameters in GPT-2's
// layout (checkpoint/gpt2_weights.h; `mirrored export` writes such directories and files,
// and so does Hugging Face's save_pretrained) instead of random ones. A resumed run takes
// its checkpoint instead.
#include "mirrored/config/config.h"
#include "mirrored/distribute/distributed_model.h"
#include "mirrored/distribute/strategy.h"

namespace mirrored::checkpoint {

// The gpt.* shape (layers, heads, width, context) from init_from's metadata, where
// `mirrored export` wrote it: a key the configuration left out takes the file's value; a
// key it gave (config.given_keys) must agree, else InputError (kCheckpoint) naming the file, the
// file's key and value and the configuration's. A file without the shape in its metadata
// (save_pretrained's) leaves the configuration as it is: the tensors' shapes are checked
// when they are read. Nothing happens without init_from or for another model.
void take_shape_from_init_from(config::TrainConfig& config);

// Collective. The chief reads the file and broadcasts the parameters; a file that does not
// fit the model (missing, truncated, another shape) is an InputError (kCheckpoint) on every
// rank, naming the file and the first tensor that does not fit; init_from with another model
// than a gpt is a configuration error (kUsage).
void initialize_from_file(const config::TrainConfig& config, distribute::MirroredStrategy& strategy,
                          distribute::DistributedModel& model);

}  // namespace mirrored::checkpoint
