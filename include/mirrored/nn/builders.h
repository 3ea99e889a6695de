#pragma once
// Models from configuration.
#include <vector>

#include "mirrored/nn/model.h"

namespace mirrored::nn {

struct MlpSpec {
  std::vector<int64_t> hidden = {256, 128};
  int64_t num_classes = 10;
};
// Linear+ReLU for each hidden width, then Linear to num_classes. Not yet built.
Model mlp(const MlpSpec& spec);

}  // namespace mirrored::nn
