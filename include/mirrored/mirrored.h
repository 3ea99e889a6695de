#pragma once
// mirrored as a library: one include for a custom training loop.
//
//   mirrored::Runtime runtime(argc, argv);                 // MPI, cluster table, device
//   mirrored::MirroredStrategy strategy(runtime);
//   auto model = strategy.scope([] { return mirrored::nn::mlp({{256, 128}, 10}); },
//                               {{1, 28, 28}, /*seed=*/7});   // chief initialises, broadcast
//   auto train = strategy.distribute_dataset(dataset, {.global_batch = 128, .seed = 7});
//   for (const auto& batch : train.epoch(0)) {
//     float loss = strategy.run(step, batch);                // this replica's step
//     float mean = strategy.reduce(mirrored::ReduceOp::kMean, loss);
//   }
//
// examples/custom_loop/ is a complete program; link with find_package(mirrored) and
// target_link_libraries(app PRIVATE mirrored::mirrored).
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/core/tensor.h"
#include "mirrored/core/timer.h"
#include "mirrored/data/dataset.h"
#include "mirrored/data/hdf5_dataset.h"
#include "mirrored/distribute/strategy.h"
#include "mirrored/io/params_file.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/builders.h"
#include "mirrored/nn/loss.h"
#include "mirrored/nn/model.h"
#include "mirrored/optim/optimizer.h"
#include "mirrored/runtime/runtime.h"
#include "mirrored/train/evaluate.h"

namespace mirrored {

// The strategy API under the names TensorFlow users look for.
using distribute::Batch;
using distribute::DatasetOptions;
using distribute::DistributedDataset;
using distribute::DistributedModel;
using distribute::EvalDataset;
using runtime::Launch;
using distribute::MirroredStrategy;
using distribute::ModelOptions;
using distribute::MultiWorkerMirroredStrategy;
using runtime::Runtime;
using runtime::RuntimeOptions;
using comm::ReduceOp;
using train::evaluate;
using train::EvalResult;

}  // namespace mirrored
