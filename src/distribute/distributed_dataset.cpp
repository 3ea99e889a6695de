#include "mirrored/distribute/distributed_dataset.h"

#include <numeric>

#include "mirrored/kernels/kernels.h"

namespace mirrored::distribute {

DistributedDataset::DistributedDataset(std::shared_ptr<const data::Dataset> dataset, DatasetOptions options,
                                       data::IndexRange share, Device device)
    : dataset_(std::move(dataset)),
      sampler_(dataset_->size, options.global_batch, share, options.seed, options.shuffle),
      first_sample_(share.begin),
      augmenter_(options.augment, options.seed),
      device_(device) {}

DistributedDataset::EpochRange DistributedDataset::epoch(int64_t epoch, int64_t first_step) {
  if (prefetcher_) prefetcher_->reset();  // before the order changes under its worker
  sampler_.set_epoch(epoch);
  epoch_ = epoch;
  const int64_t last = sampler_.steps_per_epoch();
  last_step_ = last;
  return EpochRange(this, std::min(first_step, last), last);
}

void DistributedDataset::assemble(int64_t step, Tensor& images, Tensor& labels) {
  const auto indices = sampler_.replica_indices(step);
  data::assemble_batch(*dataset_, indices, images, labels);
  augmenter_.apply(images, indices, epoch_);
}

const Batch& DistributedDataset::batch_at(int64_t step) {
  if (device_.is_cuda() && !prefetcher_) {
    // Created at the first batch, not in the constructor: the producer points at this
    // object, which is returned by value before iteration starts.
    prefetcher_ = std::make_unique<DevicePrefetcher>(device_, [this](int64_t s, Tensor& images, Tensor& labels) {
      // On the prefetch thread: reads the dataset and the current epoch's order, and uses
      // the augmenter, which the main thread leaves alone once the prefetcher exists.
      assemble(s, images, labels);
    });
  }
  if (prefetcher_) {
    const auto device_batch = prefetcher_->get(step, step + 1 < last_step_ ? step + 1 : -1);
    batch_.inputs = *device_batch.images;
    batch_.targets = *device_batch.labels;
  } else {
    assemble(step, batch_.inputs, batch_.targets);
  }
  batch_.step = step;
  batch_.first_sample = first_sample_;
  return batch_;
}

const Batch& DistributedDataset::EpochRange::Iterator::operator*() const { return owner_->batch_at(step_); }

EvalDataset::EvalDataset(std::shared_ptr<const data::Dataset> dataset, int64_t batch, int rank, int world,
                         Device device)
    : dataset_(std::move(dataset)),
      batch_size_(batch),
      range_(data::eval_shard(dataset_->size, batch, rank, world)),
      device_(device) {
  MIRRORED_CHECK(batch_size_ > 0, "evaluation batch must be positive");
  indices_.resize(static_cast<size_t>(shard_size()));
  std::iota(indices_.begin(), indices_.end(), range_.begin);
}

int64_t EvalDataset::num_batches() const { return (shard_size() + batch_size_ - 1) / batch_size_; }

const Batch& EvalDataset::batch(int64_t index) {
  const int64_t begin = index * batch_size_;
  const int64_t count = std::min(batch_size_, shard_size() - begin);
  MIRRORED_CHECK(index >= 0 && count > 0, "evaluation batch ", index, " out of range");
  Batch& host = device_.is_cpu() ? batch_ : host_batch_;
  data::assemble_batch(*dataset_, std::span<const int64_t>(indices_).subspan(static_cast<size_t>(begin),
                                                                              static_cast<size_t>(count)),
                       host.inputs, host.targets);
  if (device_.is_cuda()) {
    // Evaluation is not on the hot path: a plain copy, ordered after the previous batch's
    // kernels (the copy runs on the legacy stream, which waits for the compute stream).
    ensure_shape(batch_.inputs, host.inputs.shape(), DType::kF32, device_);
    ensure_shape(batch_.targets, host.targets.shape(), DType::kI32, device_);
    kernels::copy(host.inputs, batch_.inputs);
    kernels::copy(host.targets, batch_.targets);
  }
  batch_.step = index;
  return batch_;
}

}  // namespace mirrored::distribute
