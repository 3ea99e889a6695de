#include "mirrored/train/model_data.h"

#include <algorithm>
#include <vector>

#include "mirrored/config/run_setup.h"
#include "mirrored/core/error.h"
#include "mirrored/data/dataset.h"
#include "mirrored/data/shard_list.h"
#include "mirrored/data/token_dataset.h"
#include "mirrored/data/token_file.h"
#include "mirrored/distribute/distributed_token_dataset.h"

namespace mirrored::train {
namespace {

bool reads_tokens(const config::DataSpec& data) { return data.context > 0; }

class ImageEvalData final : public EvalData {
 public:
  ImageEvalData(const config::DataSpec& spec, const std::string& path, int64_t batch,
                distribute::MirroredStrategy& strategy, LoadedDatasets& datasets)
      : set_(datasets.images(path, spec.cache_mb)), data_(strategy.distribute_eval_dataset(set_, batch)) {}
  config::ModelInputs inputs() const override { return {set_->sample_shape, set_->num_classes}; }
  EvalResult evaluate(distribute::MirroredStrategy& strategy, distribute::DistributedModel& model) override {
    return train::evaluate(strategy, model, data_);
  }

 private:
  std::shared_ptr<const data::Dataset> set_;
  distribute::EvalDataset data_;
};

// The windows the trainer scores: data.context tokens each, at most data.eval_windows.
class TokenEvalData final : public EvalData {
 public:
  TokenEvalData(const config::DataSpec& spec, const std::string& path, int64_t batch,
                distribute::MirroredStrategy& strategy, LoadedDatasets& datasets)
      : context_(spec.context),
        set_(datasets.tokens(path, spec.cache_mb)),
        data_(set_, batch, context_, strategy.replica_id(), strategy.num_replicas_in_sync(), strategy.device(),
              spec.eval_windows) {}
  config::ModelInputs inputs() const override { return {{context_}, static_cast<int>(set_->vocab_size())}; }
  EvalResult evaluate(distribute::MirroredStrategy& strategy, distribute::DistributedModel& model) override {
    return train::evaluate(strategy, model, data_);
  }

 private:
  int64_t context_;
  std::shared_ptr<data::TokenDataset> set_;
  distribute::TokenEvalDataset data_;
};

}  // namespace

std::unique_ptr<EvalData> load_eval_data(const config::DataSpec& data, const std::string& path, int64_t batch,
                                         distribute::MirroredStrategy& strategy, LoadedDatasets& datasets) {
  if (reads_tokens(data)) return std::make_unique<TokenEvalData>(data, path, batch, strategy, datasets);
  return std::make_unique<ImageEvalData>(data, path, batch, strategy, datasets);
}

void check_data_kind(const std::string& path, const config::ModelSpec& model, const std::string& model_origin) {
  const bool gpt = model.kind == config::ModelKind::kGpt;
  bool tokens = false;
  try {
    tokens = data::is_token_file(data::expand_shards(path).front());  // shards agree, or loading says which not
  } catch (const InputError&) {  // missing or not HDF5: for an image model, the image reader says so in its terms
    if (gpt) throw;
  }
  if (gpt && !tokens)
    throw InputError(str_cat("'", path, "' has no ", data::kTokensDataset, " dataset, but the model in ", model_origin,
                             " is a gpt, which reads a token file (", data::kTokensDataset,
                             "; `mirrored data import-text` writes one)"),
                     ExitCode::kUsage);
  if (!gpt && tokens)
    throw InputError(str_cat("'", path, "' is a token file (", data::kTokensDataset, "), but the model in ",
                             model_origin, " is ", config::model_kind_name(model.kind),
                             ", which reads an image set (/images, /labels)"),
                     ExitCode::kUsage);
}

HostBatch load_first_batch(const config::DataSpec& data, const std::string& path, int64_t batch) {
  HostBatch out;
  if (reads_tokens(data)) {
    const auto tokens = data::load_token_dataset(path, data.cache_mb);
    const int64_t windows = std::min(batch, std::max<int64_t>(1, (tokens->size() - 1) / data.context));
    std::vector<int64_t> offsets(static_cast<size_t>(windows));
    for (size_t i = 0; i < offsets.size(); ++i) offsets[i] = static_cast<int64_t>(i) * data.context;
    data::assemble_token_batch(*tokens, offsets, data.context, out.inputs, out.targets);
    out.model_inputs = {{data.context}, static_cast<int>(tokens->vocab_size())};
    return out;
  }
  const auto images = config::load_dataset(path, data.cache_mb);
  std::vector<int64_t> indices(static_cast<size_t>(std::min(batch, images->size)));
  for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int64_t>(i);
  data::assemble_batch(*images, indices, out.inputs, out.targets);
  out.model_inputs = {images->sample_shape, images->num_classes};
  return out;
}

}  // namespace mirrored::train
