#include "mirrored/distribute/comm_hook.h"

#include <algorithm>

#include "mirrored/core/tensor.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored::distribute {
namespace {

class AllreduceHook final : public CommHook {
 public:
  explicit AllreduceHook(Device device) : device_(device) {}
  const char* name() const override { return "none"; }
  std::unique_ptr<comm::Work> start(comm::Communicator& comm, float* grads, const Bucket& bucket) override {
    return comm.allreduce_async(grads + bucket.begin, static_cast<size_t>(bucket.numel()), comm::DataType::kF32,
                                comm::ReduceOp::kSum);
  }
  void finish(float* grads, const Bucket& bucket, float scale) override {
    if (scale != 1.0f) kernels::scale(grads + bucket.begin, bucket.numel(), device_, scale);
  }

 private:
  Device device_;
};

class Bf16CompressionHook final : public CommHook {
 public:
  // The wire buffer is a float tensor of half as many elements, used as uint16 storage
  // (tensors have no 16-bit type): it lives on the gradients' device.
  Bf16CompressionHook(Device device, int64_t numel)
      : device_(device), storage_({(numel + 1) / 2}, DType::kF32, device) {}
  const char* name() const override { return "bf16"; }
  std::unique_ptr<comm::Work> start(comm::Communicator& comm, float* grads, const Bucket& bucket) override {
    uint16_t* wire = this->wire() + bucket.begin;
    kernels::to_bf16(grads + bucket.begin, wire, bucket.numel(), device_);
    return comm.allreduce_async(wire, static_cast<size_t>(bucket.numel()), comm::DataType::kBF16,
                                comm::ReduceOp::kSum);
  }
  void finish(float* grads, const Bucket& bucket, float scale) override {
    kernels::from_bf16(wire() + bucket.begin, grads + bucket.begin, bucket.numel(), device_, scale);
  }
  int64_t buffer_bytes() const override { return storage_.numel() * static_cast<int64_t>(sizeof(float)); }

 private:
  uint16_t* wire() const { return static_cast<uint16_t*>(storage_.raw()); }
  Device device_;
  Tensor storage_;
};

// Each bucket is reduce-scattered in place: this rank's piece of it is reduced where it lies
// in the gradients (no receive buffer), then scaled; the other ranks' pieces are left as
// the collective leaves them.
class ReduceScatterHook final : public CommHook {
 public:
  ReduceScatterHook(const Tensor& grads, std::vector<int64_t> bounds, int rank)
      : device_(grads.device()), bounds_(std::move(bounds)),
        shard_{bounds_.at(static_cast<size_t>(rank)), bounds_.at(static_cast<size_t>(rank) + 1)} {}
  const char* name() const override { return "reduce-scatter"; }
  std::unique_ptr<comm::Work> start(comm::Communicator& comm, float* grads, const Bucket& bucket) override {
    std::vector<size_t> counts;
    for (size_t r = 0; r + 1 < bounds_.size(); ++r)
      counts.push_back(static_cast<size_t>(piece(bucket, {bounds_[r], bounds_[r + 1]}).numel()));
    return comm.reduce_scatter_inplace_async(grads + bucket.begin, counts, comm::DataType::kF32,
                                             comm::ReduceOp::kSum);
  }
  void finish(float* grads, const Bucket& bucket, float scale) override {
    const optim::ArenaRange mine = piece(bucket, shard_);
    if (mine.numel() > 0 && scale != 1.0f) kernels::scale(grads + mine.begin, mine.numel(), device_, scale);
  }

 private:
  // The part of `bucket` inside `shard` (empty ranges have begin == end).
  static optim::ArenaRange piece(const Bucket& bucket, optim::ArenaRange shard) {
    const int64_t begin = std::max(bucket.begin, shard.begin);
    return {begin, std::max(begin, std::min(bucket.end, shard.end))};
  }

  Device device_;
  std::vector<int64_t> bounds_;
  optim::ArenaRange shard_;
};

}  // namespace

std::unique_ptr<CommHook> make_reduce_scatter_hook(const Tensor& grads, std::vector<int64_t> bounds, int rank) {
  return std::make_unique<ReduceScatterHook>(grads, std::move(bounds), rank);
}

std::unique_ptr<CommHook> make_comm_hook(GradCompression compression, Device device, int64_t numel) {
  switch (compression) {
    case GradCompression::kNone: return std::make_unique<AllreduceHook>(device);
    case GradCompression::kBf16: return std::make_unique<Bf16CompressionHook>(device, numel);
  }
  return std::make_unique<AllreduceHook>(device);
}

}  // namespace mirrored::distribute
