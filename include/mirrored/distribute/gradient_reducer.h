#pragma once
// Averages a model's gradients over all replicas, bucket by bucket, overlapped with
// backward (like PyTorch DDP's reducer and Horovod's tensor fusion):
//  - buckets are planned once (gradient_buckets.h), identically on every rank, and started
//    in bucket order only, so every rank issues the same collectives in the same order;
//  - a communication hook (comm_hook.h) turns each bucket into what travels and back;
//  - when the collective runs depends on the overlap mode (Overlap below);
//  - finish() waits only for what is still in flight.
//
// Reduction order: every mode starts each bucket with the same nonblocking all-reduce of
// the same size on the same communicator (MPI_Iallreduce on CPUs), whether from the
// backward hook, a communication thread or finish(). MPI asks implementations to give the
// same result for the same call on the same arguments in the same order (MPI 4.1, 6.9.1,
// "advice to implementors"; Open MPI's libnbc does), so the modes are bit-identical and the
// tests compare them exactly.
//
// Gradients on a GPU (NCCL communicator): no thread. Each bucket is enqueued from the main
// thread as backward fills it, in program order, on the runtime's one NCCL communicator,
// whose stream first waits for an event recorded on the compute stream at that moment; the
// backward kernels of earlier layers keep running meanwhile. Sync batch norm uses the same
// communicator from the same thread, so the order of NCCL calls is the same on every rank.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "mirrored/comm/communicator.h"
#include "mirrored/core/timeline.h"
#include "mirrored/distribute/comm_hook.h"
#include "mirrored/distribute/gradient_buckets.h"
#include "mirrored/distribute/shard_plan.h"
#include "mirrored/nn/parameter_arena.h"
#include "mirrored/optim/update_ranges.h"

namespace mirrored::distribute {

// How bucket all-reduces overlap with backward.
enum class Overlap {
  kAuto,    // kThread where a core is free for it, else kInline
  kOff,     // every bucket after backward, inside finish()
  kThread,  // a communication thread runs each bucket as soon as backward has filled it
  kInline,  // the backward hook starts each bucket's nonblocking all-reduce and later layer
            // boundaries advance it, all on the thread that runs backward
};
const char* overlap_name(Overlap mode);  // "auto", "off", "thread", "inline"

// kAuto resolved: a communication thread only pays when it does not take a core from
// compute, i.e. when `cores` on the host exceed ranks_on_host x compute_threads; otherwise
// inline. Other modes are returned unchanged.
Overlap resolve_overlap(Overlap requested, int cores, int ranks_on_host, int compute_threads);

// Whether waiting for peers may spin (the backend's blocking wait) rather than poll with
// sleeps: only where every rank on the host has a core for each compute thread and, with
// a communication thread (a resolved `mode`), one more for it.
bool waits_may_spin(Overlap mode, int cores, int ranks_on_host, int compute_threads);

struct ReducerOptions {
  BucketCaps caps;
  Overlap overlap = Overlap::kAuto;
  GradCompression compression = GradCompression::kNone;
  // ZeRO stage 1: reduce-scatter each bucket instead of all-reducing it, so each replica
  // ends the step with the mean gradient of its own shard of the arena only (owned_range()).
  // Needs a communicator with reduce_scatter_async and no compression; a world of one is
  // never sharded.
  bool shard = false;
  // For kAuto: ranks sharing this host (MirroredStrategy fills it from the cluster table)
  // and compute threads per rank (0: kernels::cpu_threads()).
  int ranks_on_host = 1;
  int compute_threads = 0;
};

// Communication of the last synchronised step, for a caller's phase table.
struct CommStats {
  // Sum over buckets of the time from starting a bucket's all-reduce to seeing it complete:
  // the collective itself plus waiting for the slowest peer to arrive (see
  // peer_wait_seconds) and, inline, until the next layer boundary noticed completion. The
  // hook's packing and scaling are not in it (transform_seconds).
  double comm_seconds = 0.0;
  // The part of comm_seconds not hidden behind backward: for each bucket, the part of its
  // interval (as counted in comm_seconds) after finish() began, when backward was over and
  // the main thread could only wait; summed over buckets. So exposed_seconds <= comm_seconds
  // always (equal with overlap = off, where every bucket starts inside finish()).
  double exposed_seconds = 0.0;
  // Sum over buckets of the hook's element-wise work on this rank (bf16 packing before the
  // collective, scaling by 1/n and bf16 unpacking after it): bucket copy and scale time.
  // On a GPU, the time to queue those kernels.
  double transform_seconds = 0.0;
  int64_t bytes = 0;  // gradient bytes all-reduced (before compression)
  // Per bucket, in bucket order: when this rank started the bucket's all-reduce, in
  // seconds of the system clock (comparable across the ranks of one host; across hosts as
  // far as their clocks agree).
  std::vector<double> entry_times;
};

// Collective over `comm`: every rank calls it at the same point (a log step) with its
// last_step_stats(). Returns the sum over buckets of how long this rank waited for the
// last rank to start each bucket (the latest entry time minus its own): the wait for the
// slowest peer. comm_seconds minus this is the time spent inside the collectives proper.
double peer_wait_seconds(const CommStats& stats, comm::Communicator& comm);

class GradientReducer {
 public:
  // `comm` is the communicator to reduce over, owned by the caller (the Runtime) and used
  // by this reducer only while a step is in flight: with a communication thread, nobody
  // else may use it meanwhile.
  GradientReducer(nn::ParameterArena& arena, comm::Communicator& comm, ReducerOptions options);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Gradients of the next backward are summed over `micro_batches` backward passes before
  // they are averaged (gradient accumulation): the sum over replicas is multiplied by
  // 1.0f / (replicas x micro_batches), the reciprocal rounded to float.
  void begin_step(int micro_batches = 1);
  // During the last backward of a step: called as each layer's gradients become final.
  void on_layer_ready(size_t layer_index);
  // Returns once every gradient holds its mean over replicas (and micro-batches).
  void finish();

  const std::vector<Bucket>& buckets() const { return buckets_; }
  // Which replica holds the mean of which part of the flat gradients after finish():
  // sharded, this replica's shard(rank) only (the rest holds whatever the in-place
  // reduce-scatter left there: partial sums, not to be used); unsharded, the whole arena.
  const ShardPlan& shard_plan() const { return plan_; }
  bool sharded() const { return plan_.sharded(); }
  optim::ArenaRange owned_range() const { return plan_.shard(comm_.rank()); }
  // Bytes of the communication hook's buffers (bf16 wire, or the sharded receive buffer).
  int64_t buffer_bytes() const { return hook_->buffer_bytes(); }
  Overlap overlap() const { return mode_; }  // resolved: kOff, kThread or kInline
  const CommStats& last_step_stats() const { return stats_; }
  void set_timeline(Timeline* timeline) { timeline_ = timeline; }

 private:
  struct InFlight {
    size_t bucket;
    std::unique_ptr<comm::Work> work;
    int64_t started_us;  // on the timeline
    double started_seconds;
  };
  void launch(size_t bucket);
  InFlight start(size_t bucket);
  void complete(InFlight& flight);
  void progress();           // inline: completes what is done, starts what may start
  void drain();              // inline and off: waits for every launched bucket
  void wait_for(comm::Work& work) const;  // spins or polls, as spin_ says
  void worker_loop();        // thread: start, wait, complete, one bucket at a time

  nn::ParameterArena& arena_;
  comm::Communicator& comm_;
  ReducerOptions options_;
  Overlap mode_ = Overlap::kOff;
  bool spin_ = false;  // waits_may_spin(); on a GPU the NCCL wait always polls
  ShardPlan plan_;
  std::unique_ptr<CommHook> hook_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_layer_;       // -1 for layers without parameters
  std::vector<size_t> pending_layers_;     // per bucket, layers not yet ready this step
  float scale_ = 1.0f;                     // 1 / (replicas x micro-batches)
  size_t launched_ = 0;
  Timeline* timeline_ = nullptr;
  std::vector<std::string> span_names_;

  // Inline and off: buckets launched but not started (the communicator's in-flight limit),
  // and those in flight, oldest first.
  std::deque<size_t> ready_;
  std::deque<InFlight> in_flight_;

  // Communication thread state; the step's statistics (written by whichever thread
  // completes a bucket).
  std::mutex mutex_;
  std::condition_variable work_ready_, work_done_;
  std::deque<size_t> queue_;
  size_t completed_ = 0;
  // Per bucket, this step: [start, completion] as counted in comm_seconds (wall seconds).
  std::vector<std::pair<double, double>> comm_intervals_;
  CommStats step_;
  std::exception_ptr error_;
  bool shutting_down_ = false;
  std::thread worker_;

  CommStats stats_;
};

}  // namespace mirrored::distribute
