#pragma once
// Communication hooks (PyTorch DDP's comm hooks): what happens to a gradient bucket around
// its all-reduce. The reducer decides *when* a bucket is reduced; a hook decides *how*:
// it turns the bucket into what travels (start), and what came back into the bucket's mean
// (finish). Element-wise work runs through kernels/ on the gradients' device (on a GPU,
// queued on its compute stream), so a hook works for host and device gradients alike.
//
//   none: the float32 bucket is summed in place, then scaled by 1/(replicas x micro-batches)
//   bf16: packed to bfloat16 (half the bytes), summed as bfloat16 (float32 sums rounded to
//         nearest-even, core/bf16.h), unpacked and scaled
#include <cstdint>
#include <memory>

#include "mirrored/comm/communicator.h"
#include "mirrored/core/device.h"
#include "mirrored/core/tensor.h"
#include "mirrored/distribute/gradient_buckets.h"
#include "mirrored/optim/update_ranges.h"

namespace mirrored::distribute {

enum class GradCompression { kNone, kBf16 };

class CommHook {
 public:
  virtual ~CommHook() = default;
  virtual const char* name() const = 0;
  // On the thread that starts the bucket: prepares its wire form and starts the sum over
  // ranks. `grads` is the whole flat gradient buffer; the bucket is [begin, end) of it.
  virtual std::unique_ptr<comm::Work> start(comm::Communicator& comm, float* grads, const Bucket& bucket) = 0;
  // Once the returned work is complete: grads[begin, end) = sum * scale.
  virtual void finish(float* grads, const Bucket& bucket, float scale) = 0;
  // Bytes of the hook's own buffers (wire or receive buffers), for the memory report.
  virtual int64_t buffer_bytes() const { return 0; }
};

// Sharded gradients (ZeRO stage 1): each bucket is reduce-scattered so that every rank
// receives only the part of the bucket inside its own shard of the arena, reduced in place
// (no receive buffer); finish() leaves grads[bucket ∩ shard] = sum * scale and the rest of
// the bucket undefined. `grads` is the flat gradient tensor; `bounds` the shard boundaries (replicas + 1
// offsets, bounds[r] to bounds[r + 1] is rank r's shard), `rank` this replica.
std::unique_ptr<CommHook> make_reduce_scatter_hook(const Tensor& grads, std::vector<int64_t> bounds, int rank);

// A hook for gradients on `device`; `numel` is the size of the flat gradient buffer
// (a compressing hook keeps a wire buffer of that many elements, one slot per bucket, so
// buckets in flight together never share one).
std::unique_ptr<CommHook> make_comm_hook(GradCompression compression, Device device, int64_t numel);

}  // namespace mirrored::distribute
