#pragma once
// A dataset as one replica sees it. Training: each epoch a seeded global order, this
// replica's contiguous share of every global batch (its batch plan's, batch_plan.h), the
// last partial batch dropped. Evaluation: a contiguous run of whole batches, every sample
// exactly once over replicas.
#include <cstdint>
#include <memory>

#include "mirrored/core/tensor.h"
#include "mirrored/data/augment.h"
#include "mirrored/data/dataset.h"
#include "mirrored/data/sampler.h"
#include "mirrored/distribute/device_prefetcher.h"

namespace mirrored::distribute {

// One batch of this replica, for every kind of model: what the model is given and what its
// outputs are scored against.
//   images: inputs [n, C, H, W] float32, targets [n] int32 class labels
//   tokens: inputs [n, T] int32 token ids, targets [n, T] int32 (the inputs shifted by one)
struct Batch {
  Tensor inputs;   // on the replica's device
  Tensor targets;
  int64_t step = 0;
  // The position of row 0 in the global batch: dropout masks are keyed by global sample.
  int64_t first_sample = 0;
  int64_t size() const { return targets.defined() ? targets.dim(0) : 0; }
};

struct DatasetOptions {
  int64_t global_batch = 128;
  uint64_t seed = 0;
  bool shuffle = true;
  data::AugmentOptions augment;  // training batches only, keyed by (seed, epoch, sample)
};

class DistributedDataset {
 public:
  // On a GPU `device`, batches are assembled on the host and copied over by a
  // DevicePrefetcher, the next one while the current step runs.
  // This replica computes positions `share` of every global batch.
  DistributedDataset(std::shared_ptr<const data::Dataset> dataset, DatasetOptions options, data::IndexRange share,
                     Device device = Device::cpu());

  int64_t steps_per_epoch() const { return sampler_.steps_per_epoch(); }
  int64_t per_replica_batch() const { return sampler_.per_replica_batch(); }
  int64_t global_batch() const { return sampler_.global_batch(); }
  const data::Dataset& dataset() const { return *dataset_; }

  // Range over this replica's batches of `epoch`, from `first_step` on. The Batch it
  // yields is reused: valid until the iterator advances.
  class EpochRange;
  EpochRange epoch(int64_t epoch, int64_t first_step = 0);

 private:
  friend class EpochRange;
  const Batch& batch_at(int64_t step);
  void assemble(int64_t step, Tensor& images, Tensor& labels);  // host batch, augmented

  std::shared_ptr<const data::Dataset> dataset_;
  data::ShardedSampler sampler_;
  int64_t first_sample_;
  data::Augmenter augmenter_;
  int64_t epoch_ = 0;
  Batch batch_;
  int64_t last_step_ = 0;  // end of the current epoch range
  Device device_;
  std::unique_ptr<DevicePrefetcher> prefetcher_;  // GPU devices only, from the first batch on
};

class DistributedDataset::EpochRange {
 public:
  class Iterator {
   public:
    Iterator(DistributedDataset* owner, int64_t step) : owner_(owner), step_(step) {}
    const Batch& operator*() const;
    Iterator& operator++() {
      ++step_;
      return *this;
    }
    bool operator!=(const Iterator& other) const { return step_ != other.step_; }

   private:
    DistributedDataset* owner_;
    int64_t step_;
  };
  EpochRange(DistributedDataset* owner, int64_t first, int64_t last) : owner_(owner), first_(first), last_(last) {}
  Iterator begin() const { return {owner_, first_}; }
  Iterator end() const { return {owner_, last_}; }

 private:
  DistributedDataset* owner_;
  int64_t first_, last_;
};

// Evaluation batches of this replica's share: every sample once across replicas, each
// batch the same samples at any world size (data::eval_shard).
class EvalDataset {
 public:
  EvalDataset(std::shared_ptr<const data::Dataset> dataset, int64_t batch, int rank, int world,
              Device device = Device::cpu());
  int64_t num_batches() const;
  int64_t shard_size() const { return range_.end - range_.begin; }
  const Batch& batch(int64_t index);  // reused buffer

 private:
  std::shared_ptr<const data::Dataset> dataset_;
  int64_t batch_size_;
  data::IndexRange range_;
  std::vector<int64_t> indices_;
  Device device_;
  Batch host_batch_;  // assembled here, then copied into batch_ on a GPU device
  Batch batch_;
};

}  // namespace mirrored::distribute
