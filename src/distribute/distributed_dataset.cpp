#include "mirrored/distribute/distributed_dataset.h"

#include <numeric>

namespace mirrored::distribute {

DistributedDataset::DistributedDataset(std::shared_ptr<const data::Dataset> dataset, DatasetOptions options,
                                       int rank, int world)
    : dataset_(std::move(dataset)),
      sampler_(dataset_->size, options.global_batch, rank, world, options.seed, options.shuffle) {}

DistributedDataset::EpochRange DistributedDataset::epoch(int64_t epoch, int64_t first_step) {
  sampler_.set_epoch(epoch);
  const int64_t last = sampler_.steps_per_epoch();
  return EpochRange(this, std::min(first_step, last), last);
}

const Batch& DistributedDataset::EpochRange::Iterator::operator*() const {
  Batch& batch = owner_->batch_;
  data::assemble_batch(*owner_->dataset_, owner_->sampler_.replica_indices(step_), batch.images, batch.labels);
  batch.step = step_;
  return batch;
}

EvalDataset::EvalDataset(std::shared_ptr<const data::Dataset> dataset, int64_t batch, int rank, int world)
    : dataset_(std::move(dataset)), batch_size_(batch), range_(data::eval_shard(dataset_->size, rank, world)) {
  MIRRORED_CHECK(batch_size_ > 0, "evaluation batch must be positive");
  indices_.resize(static_cast<size_t>(shard_size()));
  std::iota(indices_.begin(), indices_.end(), range_.begin);
}

int64_t EvalDataset::num_batches() const { return (shard_size() + batch_size_ - 1) / batch_size_; }

const Batch& EvalDataset::batch(int64_t index) {
  const int64_t begin = index * batch_size_;
  const int64_t count = std::min(batch_size_, shard_size() - begin);
  MIRRORED_CHECK(index >= 0 && count > 0, "evaluation batch ", index, " out of range");
  data::assemble_batch(*dataset_, std::span<const int64_t>(indices_).subspan(static_cast<size_t>(begin),
                                                                              static_cast<size_t>(count)),
                       batch_.images, batch_.labels);
  batch_.step = index;
  return batch_;
}

}  // namespace mirrored::distribute
