#include "mirrored/train/model_factory.h"

#include "mirrored/core/error.h"
#include "mirrored/nn/builders.h"

namespace mirrored::train {

nn::Model make_model(const TrainConfig& config, const Shape& /*sample_shape*/, int num_classes) {
  if (config.model == "mlp") return nn::mlp({config.hidden, num_classes});
  throw InputError(str_cat("model = '", config.model, "': expected one of: mlp"), ExitCode::kUsage);
}

}  // namespace mirrored::train
