#pragma once
// What the Trainer trains on, whatever the model: this replica's batches of (inputs,
// targets) in a schedule of epochs, and the evaluation that goes with them.
//   images (mlp, cnn, resnet): HDF5 image sets, DistributedDataset / EvalDataset;
//     evaluation: loss and accuracy over every test sample.
//   tokens (gpt): token files, DistributedTokenDataset / TokenEvalDataset; evaluation:
//     loss over a fixed set of validation windows, perplexity and bits per byte.
// The kind is chosen once, from the model, by load_training_data; the loop never asks.
#include <cstdint>
#include <memory>

#include "mirrored/config/library_options.h"
#include "mirrored/core/tensor.h"
#include "mirrored/distribute/distributed_dataset.h"
#include "mirrored/distribute/strategy.h"
#include "mirrored/train/evaluate.h"
#include "mirrored/train/loaded_datasets.h"

namespace mirrored::train {

class TrainingData {
 public:
  virtual ~TrainingData() = default;
  // One sample as the model takes it ({C, H, W} images, {context} tokens) and the number
  // of classes its outputs score (labels, or the vocabulary).
  virtual Shape sample_shape() const = 0;
  virtual int num_classes() const = 0;
  // Global batches in one epoch (the Trainer groups accumulate_steps of them into a step).
  virtual int64_t batches_per_epoch() const = 0;
  // Tokens a sample trains on (0 for images): train records report tokens/s from it.
  virtual int64_t tokens_per_sample() const = 0;
  // Starts `epoch` at its batch `first_batch`: next_batch() yields that one, then the
  // following ones. The batch stays valid until the next call.
  virtual void start_epoch(int64_t epoch, int64_t first_batch) = 0;
  virtual const distribute::Batch& next_batch() = 0;
  // Collective: every replica scores its share of the evaluation set, sums are reduced.
  virtual EvalResult evaluate(distribute::MirroredStrategy& strategy, distribute::DistributedModel& model) = 0;
};

// Collective. The data of `lib` for this replica: data.train (and data.test when
// `with_eval`), images or tokens as the model needs (model_data.h), its files read through
// `datasets` (kept there for a next Trainer when it keeps them). Throws InputError naming
// the file and the key when the data does not fit the configuration.
std::unique_ptr<TrainingData> load_training_data(const config::LibraryOptions& lib,
                                                 distribute::MirroredStrategy& strategy, bool with_eval,
                                                 LoadedDatasets& datasets);

}  // namespace mirrored::train
