#include "mirrored/distribute/distributed_token_dataset.h"

#include <algorithm>

#include "mirrored/data/token_file.h"
#include "mirrored/data/token_sampler.h"

namespace mirrored::distribute {
namespace {

// A batch through the device prefetcher (made on first use: the producer reads through the
// owner, which is returned by value before iteration starts). `next` >= 0 is prepared on
// the worker while this one computes; only when the token file may be read from another
// thread than the caller's (a thread-safe HDF5), since the caller may read or write HDF5
// (a checkpoint) meanwhile.
const Batch& from_prefetcher(std::unique_ptr<DevicePrefetcher>& prefetcher, Device device,
                             const data::TokenDataset& dataset, const DevicePrefetcher::Producer& produce,
                             int64_t step, int64_t next, Batch& out) {
  if (!prefetcher) prefetcher = std::make_unique<DevicePrefetcher>(device, produce);
  const auto on_device = prefetcher->get(step, dataset.reads_from_any_thread() ? next : -1);
  out.inputs = *on_device.images;
  out.targets = *on_device.labels;
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
                                                 TokenDatasetOptions options, data::IndexRange share,
                                                 Device device)
    : dataset_(std::move(dataset)), options_(options), share_(share), device_(device) {
  MIRRORED_CHECK(dataset_ != nullptr, "no token dataset");
  if (options_.global_batch <= 0) {
    throw InputError(str_cat("batch_size (global) must be positive, got ", options_.global_batch), ExitCode::kUsage);
  }
  MIRRORED_CHECK(share.begin >= 0 && share.begin <= share.end && share.end <= options_.global_batch, "share [",
                 share.begin, ", ", share.end, ") of a global batch of ", options_.global_batch);
  per_replica_batch_ = share.size();
  batch_.first_sample = share.begin;
  starts_ = data::window_starts(dataset_->size(), options_.context, dataset_->source());
}

int64_t DistributedTokenDataset::steps_per_epoch() const {
  return std::max<int64_t>(1, dataset_->size() / (options_.global_batch * options_.context));
}

std::vector<int64_t> DistributedTokenDataset::replica_offsets(int64_t step) const {
  return data::window_offsets(options_.seed, step, share_.begin, per_replica_batch_, starts_);
}

const Batch& DistributedTokenDataset::batch(int64_t step) {
  if (device_.is_cuda()) {
    // On the prefetcher's worker: reads the file and this object's (constant) options.
    auto produce = [this](int64_t s, Tensor& inputs, Tensor& targets) {
      data::assemble_token_batch(*dataset_, replica_offsets(s), options_.context, inputs, targets);
      dataset_->prefetch(replica_offsets(s + 1), options_.context + 1);
    };
    return from_prefetcher(prefetcher_, device_, *dataset_, produce, step, step + 1, batch_);
  }
  data::assemble_token_batch(*dataset_, replica_offsets(step), options_.context, host_batch_.inputs,
                             host_batch_.targets);
  dataset_->prefetch(replica_offsets(step + 1), options_.context + 1);
  batch_.inputs = host_batch_.inputs;
  batch_.targets = host_batch_.targets;
  batch_.step = step;
  return batch_;
}

TokenEvalDataset::TokenEvalDataset(std::shared_ptr<data::TokenDataset> dataset, int64_t batch, int64_t context,
                                   int replica, int replicas, Device device, int64_t max_windows)
    : dataset_(std::move(dataset)), batch_size_(batch), context_(context), device_(device) {
  MIRRORED_CHECK(dataset_ != nullptr, "no token dataset");
  MIRRORED_CHECK(batch_size_ > 0, "evaluation batch must be positive");
  num_windows_ = data::eval_window_count(dataset_->size(), context_, max_windows, dataset_->source());
  range_ = data::eval_shard(num_windows_, batch_size_, replica, replicas);
}

int64_t TokenEvalDataset::num_batches() const { return (shard_size() + batch_size_ - 1) / batch_size_; }

std::vector<int64_t> TokenEvalDataset::offsets(int64_t index) const {
  const int64_t begin = index * batch_size_;
  const int64_t count = std::min(batch_size_, shard_size() - begin);
  MIRRORED_CHECK(index >= 0 && count > 0, "evaluation batch ", index, " out of range");
  return eval_offsets(range_.begin + begin, count, context_);
}

int64_t TokenEvalDataset::target_bytes() {
  if (target_bytes_ >= 0) return target_bytes_;
  const data::TokenFileInfo& info = dataset_->info();
  if (info.tokenizer == data::kByteTokenizer) return target_bytes_ = shard_size() * context_;
  const std::vector<int64_t> lengths = data::read_token_byte_lengths(info);
  std::vector<int32_t> targets(static_cast<size_t>(context_));
  int64_t total = 0;
  for (const int64_t offset : eval_offsets(range_.begin, shard_size(), context_)) {
    dataset_->read(offset + 1, context_, targets.data());
    for (const int32_t token : targets) total += lengths[static_cast<size_t>(token)];
  }
  return target_bytes_ = total;
}

const Batch& TokenEvalDataset::batch(int64_t index) {
  const int64_t next = index + 1 < num_batches() ? index + 1 : -1;
  // Reading `index`, the cache loads the blocks of `next` in the background.
  auto assemble = [this](int64_t i, Tensor& inputs, Tensor& targets) {
    data::assemble_token_batch(*dataset_, offsets(i), context_, inputs, targets);
    if (i + 1 < num_batches()) dataset_->prefetch(offsets(i + 1), context_ + 1);
  };
  if (device_.is_cuda()) return from_prefetcher(prefetcher_, device_, *dataset_, assemble, index, next, batch_);
  assemble(index, host_batch_.inputs, host_batch_.targets);
  batch_.inputs = host_batch_.inputs;
  batch_.targets = host_batch_.targets;
  batch_.step = index;
  return batch_;
}

}  // namespace mirrored::distribute
