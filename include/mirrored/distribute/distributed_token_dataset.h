#pragma once
// A token dataset as one replica sees it: the language-model analogue of
// DistributedDataset. Global batch `step` is global_batch windows whose starts are a pure
// function of (seed, step, position) (data/token_sampler.h); a replica takes its share of
// the positions (its batch plan's, batch_plan.h), so any world size trains on the same
// global batches. Evaluation: fixed non-overlapping windows, each on exactly one replica.
#include <cstdint>
#include <memory>
#include <vector>

#include "mirrored/core/tensor.h"
#include "mirrored/data/sampler.h"
#include "mirrored/data/token_dataset.h"
#include "mirrored/distribute/device_prefetcher.h"
#include "mirrored/distribute/distributed_dataset.h"  // Batch: inputs [n, context], targets [n, context]

namespace mirrored::distribute {

struct TokenDatasetOptions {
  int64_t global_batch = 32;  // sequences per global batch
  int64_t context = 256;      // tokens per sequence
  uint64_t seed = 0;
};

class DistributedTokenDataset {
 public:
  // This replica reads positions `share` of every global batch. InputError (usage) when
  // global_batch is not positive, and when a window does not fit in the file
  // (context + 1 > tokens).
  DistributedTokenDataset(std::shared_ptr<data::TokenDataset> dataset, TokenDatasetOptions options,
                          data::IndexRange share, Device device = Device::cpu());

  int64_t global_batch() const { return options_.global_batch; }
  int64_t per_replica_batch() const { return per_replica_batch_; }
  int64_t context() const { return options_.context; }
  // Steps whose global batches together hold about as many tokens as the file (at least
  // one): a notion of epoch for schedules and logs; batches do not depend on it.
  int64_t steps_per_epoch() const;
  const data::TokenDataset& dataset() const { return *dataset_; }

  // This replica's window starts for global step `step`.
  std::vector<int64_t> replica_offsets(int64_t step) const;
  // This replica's batch of global step `step` (any order of steps; the buffers are reused,
  // valid until the next call). Then asks the cache to prefetch step + 1's windows. On a
  // GPU the batch is staged in pinned memory and copied on the prefetcher's copy stream,
  // which the compute stream waits for by event (no host wait for the copy); with a
  // thread-safe HDF5, step + 1 is assembled and copied while step computes. Not to be
  // moved after the first batch: the prefetcher's worker reads through this object.
  const Batch& batch(int64_t step);

 private:
  std::shared_ptr<data::TokenDataset> dataset_;
  TokenDatasetOptions options_;
  data::IndexRange share_;
  int64_t per_replica_batch_ = 0;
  int64_t starts_ = 0;
  Device device_;
  Batch host_batch_;  // assembled here on a CPU device
  Batch batch_;
  std::unique_ptr<DevicePrefetcher> prefetcher_;  // a GPU device, from the first batch on
};

// Evaluation windows: window w holds tokens [w*context, (w+1)*context] (the first
// `max_windows` such windows when positive, else all that fit). Replica r takes a
// contiguous run of whole batches, so every window is counted exactly once across replicas
// and every batch holds the same windows at any world size.
class TokenEvalDataset {
 public:
  TokenEvalDataset(std::shared_ptr<data::TokenDataset> dataset, int64_t batch, int64_t context, int replica,
                   int replicas, Device device = Device::cpu(), int64_t max_windows = 0);
  int64_t num_windows() const { return num_windows_; }  // over all replicas
  int64_t shard_size() const { return range_.end - range_.begin; }
  int64_t num_batches() const;  // of this replica (shares differ by at most one batch)
  // Reused buffers; on a GPU staged and copied as DistributedTokenDataset::batch does,
  // with the next index prepared ahead. Not to be moved after the first batch.
  const Batch& batch(int64_t index);
  // The UTF-8 bytes that this replica's scored targets decode to (each window's tokens
  // 1..context): the token count for byte tokens, else summed from the file's /token_bytes.
  // Bits per byte divide the loss by it. Read once, then kept.
  int64_t target_bytes();

 private:
  std::vector<int64_t> offsets(int64_t index) const;  // window starts of batch `index`
  int64_t target_bytes_ = -1;                          // -1 until target_bytes() has read them

  std::shared_ptr<data::TokenDataset> dataset_;
  int64_t batch_size_, context_;
  int64_t num_windows_ = 0;
  data::IndexRange range_;
  Device device_;
  Batch host_batch_;
  Batch batch_;
  std::unique_ptr<DevicePrefetcher> prefetcher_;
};

}  // namespace mirrored::distribute
