// Image classification data: an HDF5 image set (loaded whole, or behind a block cache when
// larger than data.cache_mb), a seeded order per epoch,
// evaluation over every test sample.
#include <optional>

#include "mirrored/config/run_setup.h"
#include "mirrored/train/loaded_datasets.h"
#include "mirrored/train/model_data.h"
#include "training_data_kinds.h"

namespace mirrored::train {
namespace {

class ImageTrainingData final : public TrainingData {
 public:
  ImageTrainingData(const config::LibraryOptions& lib, distribute::MirroredStrategy& strategy, bool with_eval,
                    LoadedDatasets& datasets) {
    const config::DataSpec& files = lib.data;
    train_set_ = datasets.images(files.train, files.cache_mb);
    if (!files.shape.empty() && files.shape != train_set_->sample_shape)
      throw InputError(str_cat("data.shape is ", shape_str(files.shape), " but data.train '", files.train,
                               "' holds samples of shape ", shape_str(train_set_->sample_shape),
                               " [C, H, W]; leave data.shape out to take the shape from the data, or import the "
                               "images at that shape (data import-images --size H,W --channels C)"),
                       ExitCode::kUsage);
    if (with_eval) {
      test_ = load_eval_data(files, files.test, files.eval_batch_size, strategy, datasets);
      if (test_->inputs().sample_shape != train_set_->sample_shape)
        throw InputError(str_cat("data.test '", files.test, "' has samples of shape ",
                                 shape_str(test_->inputs().sample_shape), " but data.train '", files.train, "' has ",
                                 shape_str(train_set_->sample_shape)));
    }
    config::check_augment_fits(lib.train_data.augment, train_set_->sample_shape, files.train);
    try {
      train_.emplace(strategy.distribute_dataset(train_set_, lib.train_data));
    } catch (const InputError& e) {  // the sampler does not know which file it was given
      throw InputError(str_cat("data.train '", files.train, "': ", e.what()), e.code());
    }
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
    MIRRORED_CHECK(test_ != nullptr, "evaluation without a test set");
    return test_->evaluate(strategy, model);
  }

 private:
  std::shared_ptr<const data::Dataset> train_set_;
  std::optional<distribute::DistributedDataset> train_;
  std::unique_ptr<EvalData> test_;
  std::optional<distribute::DistributedDataset::EpochRange> range_;
  std::optional<distribute::DistributedDataset::EpochRange::Iterator> it_;
  bool started_ = false;
};

}  // namespace

std::unique_ptr<TrainingData> image_training_data(const config::LibraryOptions& lib,
                                                  distribute::MirroredStrategy& strategy, bool with_eval,
                                                  LoadedDatasets& datasets) {
  return std::make_unique<ImageTrainingData>(lib, strategy, with_eval, datasets);
}

}  // namespace mirrored::train
