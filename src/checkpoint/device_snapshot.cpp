#include "mirrored/checkpoint/device_snapshot.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/io/crc32_ieee.h"

#ifdef MIRRORED_WITH_CUDA
#include "mirrored/core/cuda_check.h"
#include "mirrored/core/cuda_resources.h"
#endif

namespace mirrored::checkpoint {

// One tensor's host copy: page-locked for a GPU tensor (the only memory a device-to-host
// copy runs asynchronously into); for a CPU one the tensor itself while held, ordinary
// memory once guard_overwrites() had to copy it.
struct HostCopy {
  Tensor held;  // a CPU tensor read in place, until guarded or released
#ifdef MIRRORED_WITH_CUDA
  PinnedBuffer pinned;
#endif
  std::vector<float> plain;
  int64_t numel = 0;
  bool on_device = false;

  const float* data() const {
#ifdef MIRRORED_WITH_CUDA
    if (on_device) return static_cast<const float*>(pinned.data());
#endif
    return held.defined() ? held.data<float>() : plain.data();
  }
};

struct DeviceSnapshot::Impl {
  std::vector<HostCopy> copies;  // kept between snapshots: buffers reused while large enough
  size_t count = 0;              // tensors in the last snapshot
  int device = -1;               // the GPU of the last snapshot's device tensors; -1: none
  bool guard_pending = false;    // copies queued that the compute stream does not yet wait for
  // Guards the held CPU tensors: the writer reads them (copy_values) while the main thread
  // may copy them away (guard_overwrites) or the writer let them go (release).
  mutable std::mutex held_mutex;
  bool released = false;         // release() came: held tensors are gone, not copied

  // Ends the hold on every CPU tensor of the last snapshot still held: with `keep_values`
  // their values go into the snapshot's own buffers first (guard_overwrites), without them
  // they are gone (release).
  void end_holds(bool keep_values) {
    std::lock_guard<std::mutex> lock(held_mutex);
    for (size_t i = 0; i < count; ++i) {
      HostCopy& copy = copies[i];
      if (!copy.held.defined()) continue;
      if (keep_values) {
        copy.plain.resize(static_cast<size_t>(copy.numel));
        if (copy.numel > 0) std::memcpy(copy.plain.data(), copy.held.raw(), copy.held.bytes());
      }
      copy.held = Tensor();
      if (!keep_values) released = true;
    }
  }
#ifdef MIRRORED_WITH_CUDA
  CudaStream stream;             // the copies' own stream, created with the first GPU snapshot
  CudaEvent started, copied;     // on the compute stream / behind the copies

  void ensure_stream(int index) {
    if (stream.get() && stream.device() == index) return;
    stream = CudaStream(index, /*non_blocking=*/true);
    started = CudaEvent(index);
    copied = CudaEvent(index);
  }

  // Queues the copies of the GPU tensors among `tensors` (all on `index`).
  void copy_from_device(const std::vector<Tensor>& tensors, int index) {
    ensure_stream(index);
    started.record(compute_stream(index));  // everything queued so far: the step's update and gather
    started.make_wait(stream.get());
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (!copies[i].on_device) continue;
      HostCopy& copy = copies[i];
      const size_t bytes = tensors[i].bytes();
      if (copy.pinned.bytes() < bytes) copy.pinned = PinnedBuffer(bytes);
      MIRRORED_CUDA_CHECK(
          cudaMemcpyAsync(copy.pinned.data(), tensors[i].raw(), bytes, cudaMemcpyDeviceToHost, stream.get()));
    }
    copied.record(stream.get());
  }
#endif

  void wait() const {
#ifdef MIRRORED_WITH_CUDA
    if (device < 0) return;
    set_cuda_device(device);  // the writer thread's current device is its own
    copied.synchronize();
#endif
  }
};

DeviceSnapshot::DeviceSnapshot() : impl_(std::make_unique<Impl>()) {}

DeviceSnapshot::~DeviceSnapshot() {
  try {
    impl_->wait();
  } catch (const std::exception& e) {
    rank_warning(str_cat("checkpoint snapshot: the device copies: ", e.what()));
  }
}

void DeviceSnapshot::take(const std::vector<Tensor>& tensors) {
  Impl& s = *impl_;
  s.wait();  // the copies of the last snapshot, before their buffers are refilled
  int device = -1;
  for (const Tensor& tensor : tensors) {
    MIRRORED_CHECK(tensor.dtype() == DType::kF32, "a checkpoint snapshot of a ", dtype_name(tensor.dtype()), " tensor");
    if (!tensor.device().is_cuda()) continue;
    MIRRORED_CHECK(device < 0 || device == tensor.device().index, "a checkpoint snapshot of tensors on cuda:", device,
                   " and ", tensor.device().str());
    device = tensor.device().index;
  }
#ifndef MIRRORED_WITH_CUDA
  if (device >= 0) throw Error(ExitCode::kUsage, "a checkpoint snapshot of GPU tensors needs a build with CUDA", true);
#endif
  std::lock_guard<std::mutex> lock(s.held_mutex);
  if (s.copies.size() < tensors.size()) s.copies.resize(tensors.size());
  for (HostCopy& copy : s.copies) copy.held = Tensor();
  s.count = tensors.size();
  s.released = false;
  for (size_t i = 0; i < tensors.size(); ++i) {
    HostCopy& copy = s.copies[i];
    copy.numel = tensors[i].numel();
    copy.on_device = tensors[i].device().is_cuda();
    if (!copy.on_device) copy.held = tensors[i];  // read in place until guarded: no copy in the step
  }
  s.device = device;
#ifdef MIRRORED_WITH_CUDA
  if (device < 0) return;
  s.copy_from_device(tensors, device);
  s.guard_pending = true;
#endif
}

void DeviceSnapshot::guard_overwrites() {
  Impl& s = *impl_;
  // CPU tensors the writer has not released yet: their values go into the snapshot's own
  // buffers before the update changes them (the writer reads those from then on).
  s.end_holds(/*keep_values=*/true);
  if (!s.guard_pending) return;
#ifdef MIRRORED_WITH_CUDA
  s.copied.make_wait(compute_stream(s.device));
#endif
  s.guard_pending = false;
}

void DeviceSnapshot::release() { impl_->end_holds(/*keep_values=*/false); }

void DeviceSnapshot::wait() const { impl_->wait(); }

size_t DeviceSnapshot::size() const { return impl_->count; }

std::vector<float> DeviceSnapshot::values(size_t index, int64_t begin, int64_t count) const {
  std::vector<float> into;
  copy_values(index, begin, count, into);
  return into;
}

std::vector<float> DeviceSnapshot::values(size_t index) const {
  std::vector<float> into;
  copy_values(index, into);
  return into;
}

void DeviceSnapshot::copy_values(size_t index, int64_t begin, int64_t count, std::vector<float>& into,
                                 std::optional<uint32_t>* crc) const {
  const Impl& s = *impl_;
  MIRRORED_CHECK(index < s.count, "tensor ", index, " of a checkpoint snapshot of ", s.count);
  const HostCopy& copy = s.copies[index];
  MIRRORED_CHECK(begin >= 0 && count >= 0 && begin + count <= copy.numel, "values [", begin, ", ", begin + count,
                 ") of a snapshot tensor of ", copy.numel);
  s.wait();
  std::lock_guard<std::mutex> lock(s.held_mutex);
  MIRRORED_CHECK(copy.on_device || copy.held.defined() || !s.released, "values of tensor ", index,
                 " of a checkpoint snapshot after its release");
  const float* from = copy.data() + begin;
  if (!crc) {
    into.assign(from, from + count);
    return;
  }
  // Piece by piece, each checksummed while it is in the first-level cache: one pass over
  // memory for the copy and the CRC. Appended, not resized and overwritten: no zero fill.
  constexpr int64_t kPiece = 4096;  // floats: 16 KB
  into.clear();
  into.reserve(static_cast<size_t>(count));
  uint32_t sum = 0;
  for (int64_t at = 0; at < count; at += kPiece) {
    const int64_t piece = std::min(kPiece, count - at);
    into.insert(into.end(), from + at, from + at + piece);
    sum = io::crc32_ieee(into.data() + at, static_cast<size_t>(piece) * sizeof(float), sum);
  }
  *crc = sum;
}

void DeviceSnapshot::copy_values(size_t index, std::vector<float>& into, std::optional<uint32_t>* crc) const {
  MIRRORED_CHECK(index < impl_->count, "tensor ", index, " of a checkpoint snapshot of ", impl_->count);
  copy_values(index, 0, impl_->copies[index].numel, into, crc);
}

}  // namespace mirrored::checkpoint
