#include "mirrored/config/library_options.h"

#include <algorithm>
#include <cmath>

namespace mirrored::config {

optim::LrScheduleSpec LrScheduleEpochs::in_steps(int64_t steps_per_epoch) const {
  optim::LrScheduleSpec spec;
  spec.kind = kind;
  spec.base_lr = base_lr;
  spec.warmup_steps =
      warmup_steps > 0 ? warmup_steps : std::llround(warmup_epochs * static_cast<double>(steps_per_epoch));
  spec.total_steps = decay_steps > 0 ? decay_steps : epochs * steps_per_epoch;
  spec.min_lr = min_lr;
  for (const int64_t epoch : milestones) spec.milestones.push_back(epoch * steps_per_epoch);
  spec.gamma = gamma;
  return spec;
}

namespace {

distribute::ReducerOptions reducer_options(const TrainConfig& config) {
  distribute::ReducerOptions options;
  options.caps.bucket_bytes = static_cast<int64_t>(config.bucket_mb * 1024 * 1024);
  // A small first bucket, so communication starts early in backward.
  options.caps.first_bucket_bytes = std::min<int64_t>(options.caps.bucket_bytes, int64_t{1} << 20);
  options.overlap = config.overlap;
  options.compression = config.grad_compression;
  options.shard = config.optimizer_shard;
  return options;
}

ModelSpec model_spec(const TrainConfig& config) {
  ModelSpec spec;
  spec.kind = config.model;
  spec.mlp.hidden = config.hidden;
  spec.cnn.channels = config.cnn_channels;
  spec.cnn.kernel = config.cnn_kernel;
  spec.cnn.padding = config.cnn_padding;
  spec.cnn.hidden = config.cnn_fc;
  spec.cnn.batchnorm = config.cnn_batchnorm;
  spec.cnn.sync_batchnorm = config.sync_batchnorm;
  spec.cnn.dropout = static_cast<float>(config.dropout);
  spec.resnet.channels = config.resnet_channels;
  spec.resnet.blocks = config.resnet_blocks;
  spec.resnet.sync_batchnorm = config.sync_batchnorm;
  spec.gpt.context = config.gpt_context;
  spec.gpt.width = config.gpt_width;
  spec.gpt.heads = config.gpt_heads;
  spec.gpt.layers = config.gpt_layers;
  spec.gpt.dropout = static_cast<float>(config.gpt_dropout);
  spec.precision = config.precision;
  return spec;
}

OptimizerSpec optimizer_spec(const TrainConfig& config) {
  OptimizerSpec spec;
  spec.kind = config.optimizer;
  spec.sgd = {static_cast<float>(config.lr), static_cast<float>(config.momentum),
              static_cast<float>(config.weight_decay), false};
  spec.adam.lr = static_cast<float>(config.lr);
  spec.adam.beta1 = static_cast<float>(config.beta1);
  spec.adam.beta2 = static_cast<float>(config.beta2);
  spec.adam.eps = static_cast<float>(config.eps);
  spec.adam.weight_decay = static_cast<float>(config.weight_decay);
  spec.adam.decoupled_weight_decay = config.optimizer == OptimizerKind::kAdamW;
  return spec;
}

}  // namespace

LibraryOptions library_options(const TrainConfig& config) {
  LibraryOptions options;
  options.runtime = {config.launch, config.device, false, config.collective_timeout_s};
  options.runtime.bind_cores = config.bind_cores;
  options.runtime.trace_collectives = static_cast<size_t>(config.trace_collectives);
  options.runtime.survive_failures = config.on_failure == OnFailure::kShrink;
  options.runtime.spares = static_cast<int>(config.shrink_spares);
  // Sharded gradients are reduce-scattered over the flat communicator; the hierarchical one
  // has no reduce-scatter. So with optimizer.shard, auto means flat on any number of nodes
  // (explicit hierarchical is refused at parse time).
  options.strategy.allreduce = config.optimizer_shard && config.allreduce == runtime::Allreduce::kAuto
                                   ? runtime::Allreduce::kFlat
                                   : config.allreduce;
  options.reducer = reducer_options(config);
  options.strategy.reduction = {config.reduction, config.reduction_shards, config.uneven_batch_shares};
  options.accumulate_steps = static_cast<int>(config.accumulate_steps);
  options.train_data.global_batch = config.batch_size;
  options.train_data.seed = config.seed;
  options.train_data.shuffle = true;
  options.train_data.augment = {config.augment_flip, config.augment_crop_padding};
  options.threads = config.threads;
  options.data = {config.train_data, config.test_data,  config.eval_batch_size,
                  config.model == ModelKind::kGpt ? config.gpt_context : 0,
                  config.data_cache_mb, config.eval_windows, config.data_shape};
  options.model = model_spec(config);
  options.optimizer = optimizer_spec(config);
  options.lr_schedule = {config.lr_schedule, config.lr,     config.lr_warmup_epochs, config.epochs,
                         config.lr_min,      config.lr_milestones, config.lr_gamma,
                           config.lr_warmup_steps, config.lr_decay_steps};
  return options;
}

}  // namespace mirrored::config
