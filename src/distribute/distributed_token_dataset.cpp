#include "mirrored/distribute/distributed_token_dataset.h"

#include <algorithm>

#include "mirrored/data/token_sampler.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored::distribute {
namespace {

// The host batch becomes the replica's batch: shared on the CPU, copied to a GPU. Token
// batches are small (a few KiB to MiB of int32), so a plain copy ordered on the legacy
// stream, after the previous step's kernels, is enough.
const Batch& place(Batch& host, Batch& out, Device device, int64_t step) {
  if (device.is_cuda()) {
    ensure_shape(out.inputs, host.inputs.shape(), DType::kI32, device);
    ensure_shape(out.targets, host.targets.shape(), DType::kI32, device);
    kernels::copy(host.inputs, out.inputs);
    kernels::copy(host.targets, out.targets);
  } else {
    out.inputs = host.inputs;
    out.targets = host.targets;
  }
  out.step = step;
  return out;
}

std::vector<int64_t> eval_offsets(int64_t first_window, int64_t count, int64_t context) {
  std::vector<int64_t> offsets(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) offsets[static_cast<size_t>(i)] = (first_window + i) * context;
  return offsets;
}

}  // namespace

DistributedTokenDataset::DistributedTokenDataset(std::shared_ptr<data::TokenDataset> dataset,
                                                 TokenDatasetOptions options, int replica, int replicas, Device device)
    : dataset_(std::move(dataset)), options_(options), replica_(replica), replicas_(replicas), device_(device) {
  MIRRORED_CHECK(dataset_ != nullptr, "no token dataset");
  MIRRORED_CHECK(replicas >= 1 && replica >= 0 && replica < replicas, "replica ", replica, " of ", replicas);
  if (options_.global_batch <= 0) {
    throw InputError(str_cat("batch_size (global) must be positive, got ", options_.global_batch), ExitCode::kUsage);
  }
  if (options_.global_batch % replicas != 0) {
    throw InputError(str_cat("batch_size (global) ", options_.global_batch, " does not divide evenly over ", replicas,
                             " replicas: choose a multiple of ", replicas),
                     ExitCode::kUsage);
  }
  per_replica_batch_ = options_.global_batch / replicas;
  starts_ = data::window_starts(dataset_->size(), options_.context, dataset_->source());
}

int64_t DistributedTokenDataset::steps_per_epoch() const {
  return std::max<int64_t>(1, dataset_->size() / (options_.global_batch * options_.context));
}

std::vector<int64_t> DistributedTokenDataset::replica_offsets(int64_t step) const {
  return data::window_offsets(options_.seed, step, replica_ * per_replica_batch_, per_replica_batch_, starts_);
}

const Batch& DistributedTokenDataset::batch(int64_t step) {
  const std::vector<int64_t> offsets = replica_offsets(step);
  data::assemble_token_batch(*dataset_, offsets, options_.context, host_batch_.inputs, host_batch_.targets);
  dataset_->prefetch(replica_offsets(step + 1), options_.context + 1);
  return place(host_batch_, batch_, device_, step);
}

TokenEvalDataset::TokenEvalDataset(std::shared_ptr<data::TokenDataset> dataset, int64_t batch, int64_t context,
                                   int replica, int replicas, Device device, int64_t max_windows)
    : dataset_(std::move(dataset)), batch_size_(batch), context_(context), device_(device) {
  MIRRORED_CHECK(dataset_ != nullptr, "no token dataset");
  MIRRORED_CHECK(batch_size_ > 0, "evaluation batch must be positive");
  num_windows_ = data::eval_window_count(dataset_->size(), context_, max_windows, dataset_->source());
  range_ = data::eval_shard(num_windows_, replica, replicas);
}

int64_t TokenEvalDataset::num_batches() const { return (shard_size() + batch_size_ - 1) / batch_size_; }

const Batch& TokenEvalDataset::batch(int64_t index) {
  const int64_t begin = index * batch_size_;
  const int64_t count = std::min(batch_size_, shard_size() - begin);
  MIRRORED_CHECK(index >= 0 && count > 0, "evaluation batch ", index, " out of range");
  const std::vector<int64_t> offsets = eval_offsets(range_.begin + begin, count, context_);
  data::assemble_token_batch(*dataset_, offsets, context_, host_batch_.inputs, host_batch_.targets);
  const int64_t next_begin = begin + count;
  const int64_t next_count = std::min(batch_size_, shard_size() - next_begin);
  if (next_count > 0) dataset_->prefetch(eval_offsets(range_.begin + next_begin, next_count, context_), context_ + 1);
  return place(host_batch_, batch_, device_, index);
}

}  // namespace mirrored::distribute
