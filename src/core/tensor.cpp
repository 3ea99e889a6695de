#include "mirrored/core/tensor.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "mirrored/core/cuda_memory.h"
#include "mirrored/core/host_copy.h"

namespace mirrored {
namespace {
constexpr size_t kAlignment = 64;
constexpr size_t kHugePage = size_t{2} << 20;
}  // namespace

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_str(const Shape& shape) { return str_cat("[", join(shape, ", "), "]"); }

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kI32: return 4;
    case DType::kU8: return 1;
    case DType::kBF16: return 2;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "float32";
    case DType::kI32: return "int32";
    case DType::kU8: return "uint8";
    case DType::kBF16: return "bfloat16";
  }
  return "?";
}

Storage::Storage(size_t bytes, Device device) : bytes_(bytes), device_(device) {
  if (device.is_cuda()) {
    data_ = cuda_allocate(bytes, device.index);
    return;
  }
  if (bytes >= kHugePage) {
    const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    data_ = std::aligned_alloc(kHugePage, rounded);
    if (data_) madvise(data_, rounded, MADV_HUGEPAGE);  // advice only; failure is harmless
  } else {
    const size_t rounded = (std::max<size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
    data_ = std::aligned_alloc(kAlignment, rounded);
  }
  if (!data_) throw std::bad_alloc();
  std::memset(data_, 0, bytes);
}

Storage::~Storage() {
  if (device_.is_cuda()) {
    cuda_free(data_);
  } else {
    std::free(data_);
  }
}

void Storage::swap_allocation(Storage& other) {
  MIRRORED_CHECK(bytes_ == other.bytes_ && device_ == other.device_, "swap_allocation of ", bytes_, " bytes on ",
                 device_.str(), " with ", other.bytes_, " bytes on ", other.device_.str());
  std::swap(data_, other.data_);
}

void Tensor::swap_allocation(Tensor& other) {
  MIRRORED_CHECK(defined() && other.defined() && offset_ == 0 && other.offset_ == 0 &&
                     bytes() == storage_->bytes() && other.bytes() == other.storage_->bytes(),
                 "swap_allocation: both tensors must be whole allocations");
  storage_->swap_allocation(*other.storage_);
}

Tensor::Tensor(Shape shape, DType dtype, Device device, NoZeroing) : shape_(std::move(shape)), dtype_(dtype) {
  for (int64_t d : shape_) MIRRORED_CHECK(d >= 0, "negative dimension in ", shape_str(shape_));
  storage_ = std::make_shared<Storage>(static_cast<size_t>(numel()) * dtype_size(dtype), device);
}

Tensor::Tensor(Shape shape, DType dtype, Device device) : Tensor(std::move(shape), dtype, device, NoZeroing{}) {
  if (device.is_cuda()) cuda_memset_zero(storage_->data(), storage_->bytes(), device.index);
}

Tensor Tensor::uninitialized(Shape shape, DType dtype, Device device) {
  return Tensor(std::move(shape), dtype, device, NoZeroing{});
}

Tensor Tensor::from(const std::vector<float>& values, Shape shape) {
  Tensor t(std::move(shape));
  MIRRORED_CHECK(static_cast<int64_t>(values.size()) == t.numel(), values.size(), " values for shape ",
                 shape_str(t.shape()));
  // An empty vector's data() may be null, which memcpy may not be given even for 0 bytes.
  if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size() * sizeof(float));
  return t;
}

void* Tensor::raw() const {
  MIRRORED_CHECK(storage_ != nullptr, "tensor has no storage");
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(dtype_size(dtype_));
}

size_t Tensor::capacity_bytes() const {
  if (!storage_) return 0;
  return storage_->bytes() - static_cast<size_t>(offset_) * dtype_size(dtype_);
}

Tensor Tensor::view(int64_t offset, Shape shape) const {
  Tensor t = *this;
  t.offset_ = offset_ + offset;
  t.shape_ = std::move(shape);
  MIRRORED_CHECK(offset >= 0 && (t.offset_ + t.numel()) * static_cast<int64_t>(dtype_size(dtype_)) <=
                                    static_cast<int64_t>(storage_->bytes()),
                 "view ", shape_str(t.shape_), " at ", offset, " exceeds storage");
  return t;
}

Tensor Tensor::reshape(Shape shape) const {
  MIRRORED_CHECK(shape_numel(shape) == numel(), "cannot reshape ", shape_str(shape_), " to ",
                 shape_str(shape));
  return view(0, std::move(shape));
}

Tensor Tensor::narrow_rows(int64_t rows) const {
  MIRRORED_CHECK(!shape_.empty() && rows >= 0 && rows <= shape_[0], "narrow_rows(", rows, ") of ",
                 shape_str(shape_));
  Shape shape = shape_;
  shape[0] = rows;
  return view(0, std::move(shape));
}

Tensor Tensor::rows(int64_t first, int64_t count) const {
  MIRRORED_CHECK(!shape_.empty() && first >= 0 && count >= 0 && first + count <= shape_[0], "rows(", first, ", ",
                 count, ") of ", shape_str(shape_));
  Shape shape = shape_;
  shape[0] = count;
  return view(shape_[0] == 0 ? 0 : first * (numel() / shape_[0]), std::move(shape));
}

Tensor Tensor::clone() const {
  if (device().is_cuda()) {
    Tensor copy = uninitialized(shape_, dtype_, device());
    cuda_copy_on_device(copy.raw(), raw(), bytes(), device().index);
    return copy;
  }
  Tensor copy(shape_, dtype_, device());
  std::memcpy(copy.raw(), raw(), bytes());
  return copy;
}

void Tensor::zero() {
  if (device().is_cuda()) {
    cuda_memset_zero(raw(), bytes(), device().index);
  } else {
    std::memset(raw(), 0, bytes());
  }
}

std::vector<float> Tensor::to_vector() const {
  MIRRORED_CHECK(dtype_ == DType::kF32, "to_vector of a ", dtype_name(dtype_), " tensor");
  std::vector<float> out;
  copy_to_host(*this, out);  // the one host copy (core/host_copy.h), into a new vector
  return out;
}

void ensure_shape(Tensor& t, const Shape& shape, DType dtype, Device device) {
  const size_t needed = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  if (t.defined() && t.dtype() == dtype && t.device() == device) {
    if (t.shape() == shape) return;
    // Reuse the existing allocation whenever it is large enough.
    if (t.capacity_bytes() >= needed) {
      t = t.view(0, shape);
      return;
    }
  }
  t = Tensor(shape, dtype, device);
}

}  // namespace mirrored
