#pragma once
// The data a model reads, decided once from the model's kind: image sets (HDF5 /images,
// /labels) for mlp, cnn and resnet; token files (/tokens) for a gpt. Training
// (training_data.h), `mirrored eval` and `bench layers` all ask here, so none of them
// decides images against tokens again.
#include <cstdint>
#include <memory>
#include <string>

#include "mirrored/config/library_options.h"
#include "mirrored/config/model_factory.h"
#include "mirrored/core/tensor.h"
#include "mirrored/distribute/strategy.h"
#include "mirrored/train/evaluate.h"
#include "mirrored/train/loaded_datasets.h"

namespace mirrored::train {

// An evaluation set, sharded over the replicas: every sample (or validation window) is
// scored exactly once across them.
class EvalData {
 public:
  virtual ~EvalData() = default;
  virtual config::ModelInputs inputs() const = 0;
  // Collective: every replica scores its share, the sums are reduced.
  virtual EvalResult evaluate(distribute::MirroredStrategy& strategy, distribute::DistributedModel& model) = 0;
};

// `path` scored `batch` samples per replica at a time, as the trainer scores data.test:
// every image, or the token windows of data.context (at most data.eval_windows); the file
// read through `datasets`.
std::unique_ptr<EvalData> load_eval_data(const config::DataSpec& data, const std::string& path, int64_t batch,
                                         distribute::MirroredStrategy& strategy, LoadedDatasets& datasets);

// Throws InputError(kUsage) when `path` holds the other kind of data than `model` reads (a
// token file for an image model, or the reverse), naming the file and the model, which
// `model_origin` says where it was configured. Either reader alone would only report a
// missing dataset.
void check_data_kind(const std::string& path, const config::ModelSpec& model, const std::string& model_origin);

// The first `batch` samples of `path` on the host (fewer when the file holds fewer): images
// and labels, or for a gpt the first windows and their next-token targets.
struct HostBatch {
  Tensor inputs, targets;
  config::ModelInputs model_inputs;
};
HostBatch load_first_batch(const config::DataSpec& data, const std::string& path, int64_t batch);

}  // namespace mirrored::train
