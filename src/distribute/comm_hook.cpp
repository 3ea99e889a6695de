#include "mirrored/distribute/comm_hook.h"

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

}  // namespace

std::unique_ptr<CommHook> make_comm_hook(GradCompression compression, Device device, int64_t numel) {
  switch (compression) {
    case GradCompression::kNone: return std::make_unique<AllreduceHook>(device);
    case GradCompression::kBf16: return std::make_unique<Bf16CompressionHook>(device, numel);
  }
  return std::make_unique<AllreduceHook>(device);
}

}  // namespace mirrored::distribute
