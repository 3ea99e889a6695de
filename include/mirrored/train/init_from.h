#pragma once
// init_from = FILE.safetensors: a new run starts from a gpt's parameters in GPT-2's layout
// (train/gpt2_weights.h; `mirrored export` writes such files, and so does Hugging Face's
// save_pretrained) instead of random ones. A resumed run takes its checkpoint instead.
#include "mirrored/train/callback.h"

namespace mirrored::train {

// Collective. The chief reads the file and broadcasts the parameters; a file that does not
// fit the model (missing, truncated, another shape) is an InputError (kUsage) on every
// rank, naming the file and the first tensor that does not fit.
void initialize_from_file(TrainContext& ctx);

}  // namespace mirrored::train
