#include "mirrored/nn/builders.h"

#include "mirrored/nn/layers.h"

namespace mirrored::nn {

Model mlp(const MlpSpec& spec) {
  MIRRORED_CHECK(spec.num_classes > 0, "mlp needs num_classes > 0, got ", spec.num_classes);
  Model model;
  for (int64_t width : spec.hidden) {
    model.add(std::make_unique<Linear>(width));
    model.add(std::make_unique<ReLU>());
  }
  model.add(std::make_unique<Linear>(spec.num_classes));
  return model;
}

}  // namespace mirrored::nn
