#pragma once
// The one place a parsed TrainConfig becomes the library's option structs: what the
// runtime, the strategy, the gradient reducer, the data pipeline, the model builder, the
// optimizer and the learning-rate schedule are given. `mirrored train`, `bench train`,
// `eval` and examples/custom_loop all build from these, so they run the same thing.
#include <cstdint>
#include <string>

#include "mirrored/config/config.h"
#include "mirrored/distribute/distributed_dataset.h"
#include "mirrored/distribute/gradient_reducer.h"
#include "mirrored/distribute/strategy.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/builders.h"
#include "mirrored/optim/lr_schedule.h"
#include "mirrored/runtime/runtime.h"

namespace mirrored::config {

// The architecture and its spec (num_classes is set from the data by build_model).
struct ModelSpec {
  ModelKind kind = ModelKind::kMlp;
  nn::MlpSpec mlp;
  nn::CnnSpec cnn;
  nn::ResNetSpec resnet;
  nn::GptSpec gpt;           // vocab is set from the data by build_model
  Precision precision = Precision::kF32;  // set on the model by build_model
};

struct OptimizerSpec {
  OptimizerKind kind = OptimizerKind::kSgd;
  kernels::SgdHyper sgd;
  kernels::AdamHyper adam;   // decoupled_weight_decay set for kAdamW
};

// The schedule in epochs; in_steps() converts once the steps per epoch are known. max_steps
// does not bend the curve (lr_decay_steps does, explicitly), so a run stopped by it and resumed follows the same rates as one
// that never stopped; cosine ends with the last epoch.
struct LrScheduleEpochs {
  optim::LrScheduleKind kind = optim::LrScheduleKind::kConstant;
  double base_lr = 0.05;
  double warmup_epochs = 0.0;
  int64_t epochs = 1;
  double min_lr = 0.0;
  std::vector<int64_t> milestones;  // epochs
  double gamma = 0.1;
  int64_t warmup_steps = 0;  // > 0: replaces warmup_epochs
  int64_t decay_steps = 0;   // > 0: cosine ends here instead of at the last epoch's end
  optim::LrScheduleSpec in_steps(int64_t steps_per_epoch) const;
};

// The files a run reads and how: data.train and data.test, the evaluation batch, and for a
// gpt the token windows (token files are read through a bounded cache, data/token_dataset.h).
struct DataSpec {
  std::string train;               // data.train
  std::string test;                // data.test
  int64_t eval_batch_size = 1000;  // per replica
  int64_t context = 0;             // tokens per window (gpt.context); 0: an image model
  int64_t cache_mb = 256;          // bound of a token or image file's block cache (0: no bound)
  int64_t eval_windows = 0;        // validation windows scored (0: all that fit)
  std::vector<int64_t> shape;      // data.shape: [C, H, W] the image sets must have (empty: any)
};

struct LibraryOptions {
  runtime::RuntimeOptions runtime;
  int64_t threads = 0;                       // CPU threads per rank; 0: the host's cores shared by its ranks
  distribute::StrategyOptions strategy;
  distribute::ReducerOptions reducer;
  int accumulate_steps = 1;                  // micro-batches per update
  distribute::DatasetOptions train_data;     // sharding, shuffling, augmentation
  DataSpec data;
  ModelSpec model;
  OptimizerSpec optimizer;
  LrScheduleEpochs lr_schedule;
};

LibraryOptions library_options(const TrainConfig& config);

}  // namespace mirrored::config
