#pragma once
// Which model a configuration builds, as every command names it when a file holds another
// one: the kind and the keys that decide the parameters' shapes (the data decides the rest:
// input size, classes, vocabulary). A checkpoint records the configuration of the run that
// wrote it, a final.h5 has its config.ini beside it and an export its GPT-2 metadata, so a
// file of another model is told apart before any tensor is compared, and said once:
//   'runs/a/checkpoints/ckpt-000000100.h5' holds an mlp model (hidden 256,128); this run
//   builds a gpt (4 layers, 4 heads, width 128, context 64)
// Such a mismatch exits with ExitCode::kCheckpoint in every command (train, eval, generate,
// export).
#include <string>

#include "mirrored/config/config.h"

namespace mirrored::config {

// "mlp (hidden 256,128)", "cnn (channels 32,64, kernel 5, padding 0, fc 128)",
// "resnet (channels 16,32,64, 2 blocks)", "gpt (4 layers, 4 heads, width 128, context 64)";
// a cnn or resnet with batch norm adds ", batch norm".
std::string model_description(const TrainConfig& config);

// Whether `a` and `b` build the same kind with the same shape keys.
bool same_model(const TrainConfig& a, const TrainConfig& b);

// "" when they build the same model, else "'FILE' holds an mlp model (hidden 64); SUBJECT a
// gpt (...)", SUBJECT being who builds `current` ("this run builds", "--config 'x.ini' builds").
std::string model_mismatch(const std::string& file, const TrainConfig& stored, const std::string& subject,
                           const TrainConfig& current);

// "'FILE' holds an mlp model (hidden 64)".
std::string held_model(const std::string& file, const TrainConfig& stored);

// "a gpt (...)", "an mlp (...)".
std::string model_with_article(const TrainConfig& config);

}  // namespace mirrored::config
