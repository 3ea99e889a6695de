#include "mirrored/train/model_factory.h"

#include "mirrored/core/error.h"
#include "mirrored/nn/builders.h"

namespace mirrored::train {

nn::Model make_model(const TrainConfig& config, const Shape& sample_shape, int num_classes) {
  if (config.model == "mlp") return nn::mlp({config.hidden, num_classes});
  if (config.model == "cnn" || config.model == "resnet") {
    if (sample_shape.size() != 3)
      throw InputError(str_cat("model = ", config.model, " needs image samples [C, H, W]; the data has ",
                               shape_str(sample_shape)),
                       ExitCode::kUsage);
  }
  if (config.model == "cnn") {
    nn::CnnSpec spec;
    spec.channels = config.cnn_channels;
    spec.kernel = config.cnn_kernel;
    spec.padding = config.cnn_padding;
    spec.hidden = config.cnn_fc;
    spec.batchnorm = config.cnn_batchnorm;
    spec.sync_batchnorm = config.sync_batchnorm;
    spec.dropout = static_cast<float>(config.dropout);
    spec.num_classes = num_classes;
    // Each conv (kernel, padding) then a 2x2 pool must leave at least one pixel.
    int64_t h = sample_shape[1], w = sample_shape[2];
    for (size_t i = 0; i < spec.channels.size(); ++i) {
      h = (h + 2 * spec.padding - spec.kernel + 1) / spec.pool;
      w = (w + 2 * spec.padding - spec.kernel + 1) / spec.pool;
      if (h < 1 || w < 1)
        throw InputError(str_cat("cnn.kernel_size = ", spec.kernel, ", cnn.padding = ", spec.padding, " with ",
                                 spec.channels.size(), " conv stages (cnn.channels) leave no pixels of the ",
                                 shape_str(sample_shape), " input after stage ", i + 1,
                                 ": use fewer stages, a smaller kernel or more padding"),
                         ExitCode::kUsage);
    }
    return nn::cnn(spec);
  }
  if (config.model == "resnet") {
    nn::ResNetSpec spec;
    spec.channels = config.resnet_channels;
    spec.blocks = config.resnet_blocks;
    spec.sync_batchnorm = config.sync_batchnorm;
    spec.num_classes = num_classes;
    return nn::resnet(spec);
  }
  throw InputError(str_cat("model = '", config.model, "': expected one of: mlp, cnn, resnet"), ExitCode::kUsage);
}

}  // namespace mirrored::train
