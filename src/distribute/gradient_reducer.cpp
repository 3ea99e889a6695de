#include "mirrored/distribute/gradient_reducer.h"

#include <algorithm>
#include <chrono>

#include "mirrored/core/bf16.h"
#include "mirrored/core/error.h"
#include "mirrored/core/timer.h"

#ifdef MIRRORED_WITH_CUDA
#include "../kernels/cuda/cuda_kernels.h"
#include "mirrored/comm/nccl_communicator.h"
#include "mirrored/core/cuda_resources.h"
#endif

namespace mirrored::distribute {
namespace {
// Polling cadence of the communication thread: a few hundred immediate tests catch
// collectives that are about to complete, then 50 us sleeps keep latency low without
// taking a core.
constexpr int kSpinsBeforeSleeping = 200;
constexpr auto kPollInterval = std::chrono::microseconds(50);
}  // namespace

#ifdef MIRRORED_WITH_CUDA
struct GradientReducer::DeviceState {
  comm::NcclCommunicator* nccl = nullptr;
  int device = 0;
  std::vector<CudaEvent> ready;   // per bucket: its gradients are written
  std::vector<char> recorded;     // per bucket: `ready` recorded this step
  DeviceBuffer wire;              // bf16 staging on the device
};
#else
struct GradientReducer::DeviceState {};
#endif

GradientReducer::GradientReducer(nn::ParameterArena& arena, comm::Communicator& comm, ReducerOptions options)
    : arena_(arena), comm_(comm.duplicate()), options_(options), buckets_(plan_buckets(arena, options.caps)) {
  size_t layers = 0;
  for (const auto& info : arena.infos()) layers = std::max(layers, info.layer + 1);
  bucket_of_layer_.assign(layers, -1);
  int64_t largest = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    for (size_t layer : buckets_[b].layers) bucket_of_layer_[layer] = static_cast<int>(b);
    largest = std::max(largest, buckets_[b].numel());
    span_names_.push_back(str_cat("allreduce bucket ", b, " (", buckets_[b].numel(), " floats)"));
  }
  pending_layers_.assign(buckets_.size(), 0);
  const Device grads_device = arena.flat_grads().device();
  if (grads_device.is_cuda()) {
#ifdef MIRRORED_WITH_CUDA
    device_ = std::make_unique<DeviceState>();
    device_->nccl = dynamic_cast<comm::NcclCommunicator*>(comm_.get());
    MIRRORED_CHECK(device_->nccl != nullptr, "gradients on ", grads_device.str(),
                   " need the NCCL communicator, got '", comm_->backend(), "'");
    device_->device = grads_device.index;
    for (size_t b = 0; b < buckets_.size(); ++b) device_->ready.emplace_back(grads_device.index);
    device_->recorded.assign(buckets_.size(), 0);
    if (options_.compression == GradCompression::kBf16)
      device_->wire = DeviceBuffer(static_cast<size_t>(largest) * sizeof(uint16_t), grads_device.index);
#endif
  } else if (options_.compression == GradCompression::kBf16) {
    wire_.resize(static_cast<size_t>(largest));
  }
  if (options_.overlap != Overlap::kOff && comm_->size() > 1) worker_ = std::thread([this] { worker_loop(); });
  begin_step(1);
}

GradientReducer::~GradientReducer() {
  if (worker_.joinable()) {
    {
      std::lock_guard lock(mutex_);
      shutting_down_ = true;
    }
    work_ready_.notify_all();
    worker_.join();
  }
}

void GradientReducer::begin_step(int micro_batches) {
  MIRRORED_CHECK(micro_batches >= 1, "micro_batches = ", micro_batches);
  for (size_t b = 0; b < buckets_.size(); ++b) pending_layers_[b] = buckets_[b].layers.size();
  launched_ = 0;
  scale_ = 1.0f / static_cast<float>(comm_->size() * micro_batches);
#ifdef MIRRORED_WITH_CUDA
  if (device_) std::fill(device_->recorded.begin(), device_->recorded.end(), 0);
#endif
  std::lock_guard lock(mutex_);
  completed_ = 0;
  comm_seconds_ = 0.0;
  error_ = nullptr;
}

void GradientReducer::on_layer_ready(size_t layer_index) {
  if (layer_index >= bucket_of_layer_.size() || bucket_of_layer_[layer_index] < 0) return;
  const auto bucket = static_cast<size_t>(bucket_of_layer_[layer_index]);
  MIRRORED_CHECK(pending_layers_[bucket] > 0, "layer ", layer_index, " reported ready twice");
  --pending_layers_[bucket];
  // Launch in bucket order only, so every rank issues the same collectives in the same order.
  while (launched_ < buckets_.size() && pending_layers_[launched_] == 0) launch(launched_++);
}

void GradientReducer::launch(size_t bucket) {
  if (!worker_.joinable()) return;  // no overlap: finish() reduces every bucket in order
#ifdef MIRRORED_WITH_CUDA
  if (device_) {
    // Now, on the main thread: the event covers exactly the kernels queued so far, which
    // include every one that wrote this bucket, and none of the later layers'.
    device_->ready[bucket].record(compute_stream(device_->device));
    device_->recorded[bucket] = 1;
  }
#endif
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(bucket);
  }
  work_ready_.notify_one();
}

void GradientReducer::finish() {
  Stopwatch exposed;
  stats_ = CommStats{};
  if (worker_.joinable()) {
    while (launched_ < buckets_.size()) launch(launched_++);  // backward ran without hooks
    std::unique_lock lock(mutex_);
    work_done_.wait(lock, [this] { return completed_ == buckets_.size() || error_; });
    if (error_) std::rethrow_exception(error_);
    stats_.comm_seconds = comm_seconds_;
  } else {
    for (size_t b = 0; b < buckets_.size(); ++b) reduce_bucket(b);
    launched_ = buckets_.size();
    stats_.comm_seconds = comm_seconds_;
  }
  stats_.exposed_seconds = exposed.seconds();
  for (const auto& bucket : buckets_) stats_.bytes += bucket.numel() * static_cast<int64_t>(sizeof(float));
}

void GradientReducer::all_reduce_sum(void* data, size_t count, comm::DataType type) {
  if (!worker_.joinable()) {
    comm_->allreduce(data, count, type, comm::ReduceOp::kSum);
    return;
  }
  // On the communication thread: a nonblocking all-reduce driven by polling that sleeps
  // between tests, so a thread waiting for slower peers yields its core to backward
  // instead of spinning inside a blocking call (ranks often share cores on CPU nodes).
  auto pending = comm_->allreduce_async(data, count, type, comm::ReduceOp::kSum);
  int spins = 0;
  while (!pending->test()) {
    if (++spins > kSpinsBeforeSleeping) std::this_thread::sleep_for(kPollInterval);
  }
}

void GradientReducer::reduce_bucket(size_t index) {
  const Bucket& bucket = buckets_[index];
  Timeline::Span span(timeline_, span_names_[index], "allreduce");
  Stopwatch clock;
  if (device_) {
    reduce_bucket_on_device(index);
    const double seconds = clock.seconds();
    std::lock_guard lock(mutex_);
    comm_seconds_ += seconds;
    return;
  }
  float* grads = arena_.flat_grads().data<float>() + bucket.begin;
  const auto count = static_cast<size_t>(bucket.numel());
  if (options_.compression == GradCompression::kBf16) {
    for (size_t i = 0; i < count; ++i) wire_[i] = float_to_bf16(grads[i]);
    all_reduce_sum(wire_.data(), count, comm::DataType::kBF16);
    for (size_t i = 0; i < count; ++i) grads[i] = bf16_to_float(wire_[i]) * scale_;
  } else {
    all_reduce_sum(grads, count, comm::DataType::kF32);
    if (scale_ != 1.0f)
      for (size_t i = 0; i < count; ++i) grads[i] *= scale_;
  }
  const double seconds = clock.seconds();
  std::lock_guard lock(mutex_);
  comm_seconds_ += seconds;
}

void GradientReducer::reduce_bucket_on_device([[maybe_unused]] size_t index) {
#ifdef MIRRORED_WITH_CUDA
  DeviceState& d = *device_;
  const Bucket& bucket = buckets_[index];
  float* grads = arena_.flat_grads().data<float>() + bucket.begin;
  const int64_t count = bucket.numel();
  if (!d.recorded[index]) d.ready[index].record(compute_stream(d.device));  // inline mode: all queued
  d.nccl->wait_for(d.ready[index].get());
  const cudaStream_t stream = d.nccl->stream();
  if (options_.compression == GradCompression::kBf16) {
    auto* wire = d.wire.as<uint16_t>();
    kernels::cuda::float_to_bf16(grads, wire, count, stream);
    d.nccl->enqueue_allreduce(wire, static_cast<size_t>(count), comm::DataType::kBF16, comm::ReduceOp::kSum);
    kernels::cuda::bf16_to_float(wire, grads, count, scale_, stream);
  } else {
    d.nccl->enqueue_allreduce(grads, static_cast<size_t>(count), comm::DataType::kF32, comm::ReduceOp::kSum);
    if (scale_ != 1.0f) kernels::cuda::scale_on(stream, grads, count, scale_);
  }
  d.nccl->synchronize("gradient allreduce", static_cast<size_t>(count));
#else
  MIRRORED_CHECK(false, "device gradients in a build without CUDA");
#endif
}

void GradientReducer::worker_loop() {
  while (true) {
    size_t bucket;
    {
      std::unique_lock lock(mutex_);
      work_ready_.wait(lock, [this] { return shutting_down_ || !queue_.empty(); });
      if (queue_.empty()) return;  // shutting down with nothing left
      bucket = queue_.front();
      queue_.pop_front();
    }
    try {
      reduce_bucket(bucket);
    } catch (...) {
      std::lock_guard lock(mutex_);
      error_ = std::current_exception();
    }
    {
      std::lock_guard lock(mutex_);
      ++completed_;
    }
    work_done_.notify_all();
  }
}

}  // namespace mirrored::distribute
