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

 private:
  uint16_t* wire() const { return static_cast<uint16_t*>(storage_.raw()); }
  Device device_;
  Tensor storage_;
};

// The received piece of each bucket lands in a shard-sized buffer (the collective may not
// write into the buffer it reads), then is copied into the gradients and scaled.
class ReduceScatterHook final : public CommHook {
 public:
  ReduceScatterHook(const Tensor& grads, std::vector<int64_t> bounds, int rank)
      : grads_(grads), bounds_(std::move(bounds)), rank_(rank),
        shard_{bounds_.at(static_cast<size_t>(rank)), bounds_.at(static_cast<size_t>(rank) + 1)},
        received_({std::max<int64_t>(shard_.numel(), 1)}, DType::kF32, grads.device()) {}
  const char* name() const override { return "reduce-scatter"; }
  std::unique_ptr<comm::Work> start(comm::Communicator& comm, float* grads, const Bucket& bucket) override {
    std::vector<size_t> counts;
    for (size_t r = 0; r + 1 < bounds_.size(); ++r)
      counts.push_back(static_cast<size_t>(piece(bucket, {bounds_[r], bounds_[r + 1]}).numel()));
    const optim::ArenaRange mine = piece(bucket, shard_);
    float* recv = received_.data<float>() + (mine.numel() > 0 ? mine.begin - shard_.begin : 0);
    return comm.reduce_scatter_async(grads + bucket.begin, recv, counts, comm::DataType::kF32, comm::ReduceOp::kSum);
  }
  void finish(float*, const Bucket& bucket, float scale) override {
    const optim::ArenaRange mine = piece(bucket, shard_);
    if (mine.numel() == 0) return;
    Tensor target = grads_.view(mine.begin, {mine.numel()});
    kernels::copy(received_.view(mine.begin - shard_.begin, {mine.numel()}), target);
    if (scale != 1.0f) kernels::scale(target, scale);
  }

 private:
  // The part of `bucket` inside `shard` (empty ranges have begin == end).
  static optim::ArenaRange piece(const Bucket& bucket, optim::ArenaRange shard) {
    const int64_t begin = std::max(bucket.begin, shard.begin);
    return {begin, std::max(begin, std::min(bucket.end, shard.end))};
  }

  Tensor grads_;
  std::vector<int64_t> bounds_;
  int rank_;
  optim::ArenaRange shard_;
  Tensor received_;
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
