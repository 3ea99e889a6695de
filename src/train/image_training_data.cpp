// Image classification data: an HDF5 image set loaded whole, a seeded order per epoch,
// evaluation over every test sample.
#include <optional>

#include "mirrored/train/run_setup.h"
#include "training_data_kinds.h"

namespace mirrored::train {
namespace {

std::shared_ptr<const data::Dataset> load_test_set(const TrainConfig& config, const data::Dataset& train_set) {
  auto test_set = load_dataset(config.test_data);
  if (test_set->sample_shape != train_set.sample_shape)
    throw InputError(str_cat("data.test '", config.test_data, "' has samples of shape ",
                             shape_str(test_set->sample_shape), " but data.train '", config.train_data, "' has ",
                             shape_str(train_set.sample_shape)));
  return test_set;
}

class ImageTrainingData final : public TrainingData {
 public:
  ImageTrainingData(const TrainConfig& config, const LibraryOptions& lib, distribute::MirroredStrategy& strategy,
                    bool with_eval) {
    train_set_ = load_dataset(config.train_data);
    const auto test_set = with_eval ? load_test_set(config, *train_set_) : nullptr;
    check_augment_fits(lib.train_data.augment, train_set_->sample_shape, config.train_data);
    try {
      train_.emplace(strategy.distribute_dataset(train_set_, lib.train_data));
    } catch (const InputError& e) {  // the sampler does not know which file it was given
      throw InputError(str_cat("data.train '", config.train_data, "': ", e.what()), e.code());
    }
    if (test_set) test_.emplace(strategy.distribute_eval_dataset(test_set, config.eval_batch_size));
  }

  Shape sample_shape() const override { return train_set_->sample_shape; }
  int num_classes() const override { return train_set_->num_classes; }
  int64_t batches_per_epoch() const override { return train_->steps_per_epoch(); }
  int64_t tokens_per_sample() const override { return 0; }

  // The dataset reuses its Batch, so the iterator advances only when the next batch is
  // asked for.
  void start_epoch(int64_t epoch, int64_t first_batch) override {
    range_.emplace(train_->epoch(epoch, first_batch));
    it_.emplace(range_->begin());
    started_ = false;
  }
  const distribute::Batch& next_batch() override {
    if (started_) ++*it_;
    started_ = true;
    return **it_;
  }

  EvalResult evaluate(distribute::MirroredStrategy& strategy, distribute::DistributedModel& model) override {
    MIRRORED_CHECK(test_.has_value(), "evaluation without a test set");
    return train::evaluate(strategy, model, *test_);
  }

 private:
  std::shared_ptr<const data::Dataset> train_set_;
  std::optional<distribute::DistributedDataset> train_;
  std::optional<distribute::EvalDataset> test_;
  std::optional<distribute::DistributedDataset::EpochRange> range_;
  std::optional<distribute::DistributedDataset::EpochRange::Iterator> it_;
  bool started_ = false;
};

}  // namespace

std::unique_ptr<TrainingData> image_training_data(const TrainConfig& config, const LibraryOptions& lib,
                                                  distribute::MirroredStrategy& strategy, bool with_eval) {
  return std::make_unique<ImageTrainingData>(config, lib, strategy, with_eval);
}

}  // namespace mirrored::train
