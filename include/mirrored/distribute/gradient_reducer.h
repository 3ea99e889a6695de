#pragma once
// Averages a model's gradients over all replicas, bucket by bucket, overlapped with
// backward (like PyTorch DDP's reducer and Horovod's tensor fusion):
//  - buckets are planned once (gradient_buckets.h), identically on every rank;
//  - when backward has finished every layer of a bucket, the bucket is handed to a
//    communication thread, which all-reduces it on its own duplicated communicator
//    while the main thread keeps computing the earlier layers' gradients;
//  - finish() waits only for what is still in flight.
// With overlap off the same buckets are all-reduced in the same order inside finish(),
// so both modes give bit-identical results.
//
// Gradients on a GPU (CUDA build, NCCL communicator): when a bucket is launched the main
// thread records an event on the compute stream, right after queueing the kernels that
// wrote the bucket's gradients; the communication thread makes the NCCL stream wait on
// it, all-reduces and scales there, and waits for completion under the collective
// timeout. Backward kernels keep running on the compute stream meanwhile.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "mirrored/comm/communicator.h"
#include "mirrored/core/timeline.h"
#include "mirrored/distribute/gradient_buckets.h"
#include "mirrored/nn/parameter_arena.h"

namespace mirrored::distribute {

enum class GradCompression { kNone, kBf16 };

// How bucket all-reduces overlap with backward.
enum class Overlap {
  kAuto,    // kThread where a core is free for it, else kInline
  kOff,     // every bucket after backward, inside finish()
  kThread,  // a communication thread runs each bucket as soon as backward has filled it
  kInline,  // the backward hook starts each bucket's nonblocking all-reduce and later layer
            // boundaries advance it, all on the thread that runs backward
};

struct ReducerOptions {
  BucketCaps caps;
  Overlap overlap = Overlap::kAuto;
  GradCompression compression = GradCompression::kNone;
};

// Communication time of the last synchronised step.
struct CommStats {
  double comm_seconds = 0.0;     // sum of the buckets' all-reduce times
  double exposed_seconds = 0.0;  // time finish() kept the main thread waiting
  int64_t bytes = 0;             // gradient bytes all-reduced (before compression)
};

class GradientReducer {
 public:
  // `comm` is duplicated: the reducer's collectives never interleave with the caller's.
  GradientReducer(nn::ParameterArena& arena, comm::Communicator& comm, ReducerOptions options);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Gradients of the next backward are summed over `micro_batches` backward passes before
  // they are averaged (gradient accumulation): the result is divided by replicas x that.
  void begin_step(int micro_batches = 1);
  // During the last backward of a step: called as each layer's gradients become final.
  void on_layer_ready(size_t layer_index);
  // Returns once every gradient holds its mean over replicas (and micro-batches).
  void finish();

  const std::vector<Bucket>& buckets() const { return buckets_; }
  const CommStats& last_step_stats() const { return stats_; }
  void set_timeline(Timeline* timeline) { timeline_ = timeline; }

 private:
  void launch(size_t bucket);
  void reduce_bucket(size_t bucket);  // runs on the communication thread (or inline)
  void all_reduce_sum(void* data, size_t count, comm::DataType type);
  void worker_loop();
  void reduce_bucket_on_device(size_t bucket);
  struct DeviceState;                      // events, bf16 wire buffer: CUDA only
  std::unique_ptr<DeviceState> device_;    // null for host gradients

  nn::ParameterArena& arena_;
  std::unique_ptr<comm::Communicator> comm_;
  ReducerOptions options_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_layer_;       // -1 for layers without parameters
  std::vector<size_t> pending_layers_;     // per bucket, layers not yet ready this step
  std::vector<uint16_t> wire_;             // bf16 staging, sized to the largest bucket
  float scale_ = 1.0f;                     // 1 / (replicas x micro-batches)
  size_t launched_ = 0;
  Timeline* timeline_ = nullptr;
  std::vector<std::string> span_names_;

  // Communication thread state.
  std::mutex mutex_;
  std::condition_variable work_ready_, work_done_;
  std::deque<size_t> queue_;
  size_t completed_ = 0;
  double comm_seconds_ = 0.0;
  std::exception_ptr error_;
  bool shutting_down_ = false;
  std::thread worker_;

  CommStats stats_;
};

}  // namespace mirrored::distribute
