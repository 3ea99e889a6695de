#pragma once
// Tensor: a dense row-major array with a shape, viewing a reference-counted Storage on a
// Device. Views share storage (the parameter arena hands out views of one flat buffer),
// so a Tensor is cheap to copy; `clone()` makes an independent copy.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mirrored/core/device.h"
#include "mirrored/core/error.h"

namespace mirrored {

using Shape = std::vector<int64_t>;
int64_t shape_numel(const Shape& shape);
std::string shape_str(const Shape& shape);  // "[128, 784]"

// kBF16: bfloat16 bits (core/bf16.h), the operands a layer keeps rounded for several bf16
// products (kernels::round_to_bf16).
enum class DType { kF32, kI32, kU8, kBF16 };
size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);

template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::kF32; }
template <> constexpr DType dtype_of<int32_t>() { return DType::kI32; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::kU8; }
template <> constexpr DType dtype_of<uint16_t>() { return DType::kBF16; }

// Owns one allocation. CPU memory is 64-byte aligned, and large blocks ask for huge pages,
// because first-touch page faults dominate fresh 4 KiB pages on these machines.
class Storage {
 public:
  Storage(size_t bytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  // Exchanges the two allocations (same size and device): every tensor viewing either
  // storage then sees the other's memory, without a byte copied.
  void swap_allocation(Storage& other);

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
};

class Tensor {
 public:
  Tensor() = default;
  // Allocates zero-initialised storage. On a GPU the zeroing is queued on the device's
  // compute stream: ordered with the kernels and with the synchronous host copies, but not
  // with work on other streams (see uninitialized()).
  Tensor(Shape shape, DType dtype = DType::kF32, Device device = Device::cpu());
  // Storage the caller overwrites before reading: on a GPU no zeroing is queued, so a copy
  // on another stream (the batch prefetcher's) cannot be overtaken by it. CPU storage is
  // zeroed all the same.
  static Tensor uninitialized(Shape shape, DType dtype, Device device);
  static Tensor from(const std::vector<float>& values, Shape shape);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int64_t dim(size_t i) const { return shape_.at(i); }
  size_t rank() const { return shape_.size(); }
  int64_t numel() const { return shape_numel(shape_); }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  // Bytes of storage from this tensor's first element to the end of the allocation.
  size_t capacity_bytes() const;
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }

  void* raw() const;
  template <typename T>
  T* data() const {
    MIRRORED_CHECK(dtype_ == dtype_of<T>(), "tensor holds ", dtype_name(dtype_), ", asked for ",
                   dtype_name(dtype_of<T>()));
    return static_cast<T*>(raw());
  }

  // A view of `shape` starting `offset` elements into this tensor's storage.
  Tensor view(int64_t offset, Shape shape) const;
  Tensor reshape(Shape shape) const;  // same elements, new shape (a view)
  // First `rows` entries along dimension 0 (a view): a smaller last batch reuses buffers.
  Tensor narrow_rows(int64_t rows) const;
  // Entries [first, first + count) along dimension 0 (a view): one group of a batch.
  Tensor rows(int64_t first, int64_t count) const;
  Tensor clone() const;
  // Exchanges the memory behind this tensor and `other`, both whole allocations of the same
  // size on the same device (Storage::swap_allocation): views of either follow the swap.
  void swap_allocation(Tensor& other);
  void zero();  // on a GPU: queued on the compute stream, like the constructor's zeroing

  std::vector<float> to_vector() const;  // copies to the host

 private:
  struct NoZeroing {};
  Tensor(Shape shape, DType dtype, Device device, NoZeroing);

  std::shared_ptr<Storage> storage_;
  int64_t offset_ = 0;  // in elements
  Shape shape_;
  DType dtype_ = DType::kF32;
};

// Makes `t` hold `shape` (reallocating only when it must grow), so per-step buffers are
// allocated once and reused: no allocation in the steady-state step.
void ensure_shape(Tensor& t, const Shape& shape, DType dtype = DType::kF32,
                  Device device = Device::cpu());

}  // namespace mirrored
