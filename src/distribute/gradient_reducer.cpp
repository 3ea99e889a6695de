#include "mirrored/distribute/gradient_reducer.h"

#include <algorithm>
#include <atomic>
#include <chrono>

#include "mirrored/comm/health/flight_recorder.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/core/timer.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored::distribute {
namespace {
double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Printed once per process, on the chief, whatever number of models it builds.
void announce(const std::string& line) {
  static std::atomic<bool> announced{false};
  if (!announced.exchange(true)) chief_info(line);
}
}  // namespace

const char* overlap_name(Overlap mode) {
  switch (mode) {
    case Overlap::kAuto: return "auto";
    case Overlap::kOff: return "off";
    case Overlap::kThread: return "thread";
    case Overlap::kInline: return "inline";
  }
  return "?";
}

Overlap resolve_overlap(Overlap requested, int cores, int ranks_on_host, int compute_threads) {
  if (requested != Overlap::kAuto) return requested;
  return cores > ranks_on_host * compute_threads ? Overlap::kThread : Overlap::kInline;
}

bool waits_may_spin(Overlap mode, int cores, int ranks_on_host, int compute_threads) {
  const int waiting_threads = mode == Overlap::kThread ? 1 : 0;  // inline and off wait on the compute thread
  return cores >= ranks_on_host * (compute_threads + waiting_threads);
}

double peer_wait_seconds(const CommStats& stats, comm::Communicator& comm) {
  const size_t buckets = stats.entry_times.size();
  std::vector<double> all(buckets * static_cast<size_t>(comm.size()));
  comm.allgather(stats.entry_times.data(), all.data(), buckets, comm::DataType::kF64);
  double waited = 0.0;
  for (size_t b = 0; b < buckets; ++b) {
    double latest = stats.entry_times[b];
    for (int r = 0; r < comm.size(); ++r) latest = std::max(latest, all[static_cast<size_t>(r) * buckets + b]);
    waited += latest - stats.entry_times[b];
  }
  return waited;
}

GradientReducer::GradientReducer(nn::ParameterArena& arena, comm::Communicator& comm, ReducerOptions options)
    : arena_(arena),
      comm_(comm),
      options_(options),
      plan_(ShardPlan::make(arena.flat_grads().numel(), comm.size(), options.shard)),
      buckets_(plan_buckets(arena, options.caps)) {
  size_t layers = 0;
  for (const auto& info : arena.infos()) layers = std::max(layers, info.layer + 1);
  bucket_of_layer_.assign(layers, -1);
  const Tensor& grads = arena.flat_grads();
  if (plan_.sharded()) {
    MIRRORED_CHECK(options_.compression == GradCompression::kNone,
                   "sharded gradients are reduce-scattered in float32: no compression");
    hook_ = make_reduce_scatter_hook(grads, plan_.bounds(), comm_.rank());
    const auto [fewest, most] = std::minmax_element(plan_.counts().begin(), plan_.counts().end());
    chief_info(str_cat("optimizer state sharded over ", comm_.size(), " replicas (", *fewest,
                       *most == *fewest ? std::string() : str_cat(" to ", *most),
                       " parameters each): gradient buckets reduce-scattered, updated shards all-gathered"));
  } else {
    hook_ = make_comm_hook(options_.compression, grads.device(), grads.numel());
  }
  for (size_t b = 0; b < buckets_.size(); ++b) {
    for (size_t layer : buckets_[b].layers) bucket_of_layer_[layer] = static_cast<int>(b);
    span_names_.push_back(
        str_cat(plan_.sharded() ? "reduce-scatter bucket " : "allreduce bucket ", b, " (", buckets_[b].numel(), " floats)"));
  }
  pending_layers_.assign(buckets_.size(), 0);

  // The overlap mode. A world of one has nothing to overlap; on a GPU enqueueing is
  // already asynchronous, so a thread would only add a second NCCL caller.
  const int compute_threads = options_.compute_threads > 0 ? options_.compute_threads : kernels::cpu_threads();
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (comm_.size() == 1) {
    mode_ = Overlap::kOff;
  } else if (grads.device().is_cuda()) {
    mode_ = options_.overlap == Overlap::kOff ? Overlap::kOff : Overlap::kInline;
    announce(str_cat("gradient overlap: ", mode_ == Overlap::kOff ? "off" : "buckets enqueued as backward fills them",
                     " (NCCL on ", grads.device().str(), ", ", comm_.size(), " ranks)"));
  } else {
    mode_ = resolve_overlap(options_.overlap, cores, options_.ranks_on_host, compute_threads);
    spin_ = waits_may_spin(mode_, cores, options_.ranks_on_host, compute_threads);
    announce(str_cat("gradient overlap: ", overlap_name(mode_), " (", options_.ranks_on_host, " rank(s) x ",
                     compute_threads, " thread(s) on ", cores, " cores",
                     options_.overlap == Overlap::kAuto ? ", auto" : "", "); waits for peers ",
                     spin_ ? "spin" : "poll and sleep"));
  }
  if (mode_ == Overlap::kThread) worker_ = std::thread([this] { worker_loop(); });
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
  MIRRORED_CHECK(ready_.empty() && in_flight_.empty(), "begin_step() while buckets are in flight");
  for (size_t b = 0; b < buckets_.size(); ++b) pending_layers_[b] = buckets_[b].layers.size();
  launched_ = 0;
  scale_ = 1.0f / static_cast<float>(comm_.size() * micro_batches);
  std::lock_guard lock(mutex_);
  completed_ = 0;
  step_ = CommStats{};
  step_.entry_times.assign(buckets_.size(), 0.0);
  comm_intervals_.assign(buckets_.size(), {0.0, 0.0});
  error_ = nullptr;
}

void GradientReducer::on_layer_ready(size_t layer_index) {
  // Every layer boundary is a chance to move the collectives in flight along.
  if (mode_ == Overlap::kInline) progress();
  if (layer_index >= bucket_of_layer_.size() || bucket_of_layer_[layer_index] < 0) return;
  const auto bucket = static_cast<size_t>(bucket_of_layer_[layer_index]);
  MIRRORED_CHECK(pending_layers_[bucket] > 0, "layer ", layer_index, " reported ready twice");
  --pending_layers_[bucket];
  // Launch in bucket order only, so every rank issues the same collectives in the same order.
  if (mode_ == Overlap::kOff) return;  // finish() launches every bucket
  while (launched_ < buckets_.size() && pending_layers_[launched_] == 0) launch(launched_++);
}

void GradientReducer::launch(size_t bucket) {
  if (mode_ == Overlap::kThread) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(bucket);
    }
    work_ready_.notify_one();
    return;
  }
  ready_.push_back(bucket);
  progress();
}

GradientReducer::InFlight GradientReducer::start(size_t bucket) {
  Stopwatch transform;
  const double entry = wall_seconds();
  const int64_t started_us = timeline_ ? timeline_->now_us() : 0;
  const comm::CallSite site("gradient bucket", static_cast<int64_t>(bucket));
  auto work = hook_->start(comm_, arena_.flat_grads().data<float>(), buckets_[bucket]);
  const double seconds = transform.seconds();
  std::lock_guard lock(mutex_);
  step_.entry_times[bucket] = entry;
  // Starting a nonblocking collective is (mostly) the hook's packing; the rest of the
  // time to completion is counted in complete().
  step_.transform_seconds += seconds;
  return {bucket, std::move(work), started_us, entry + seconds};
}

void GradientReducer::complete(InFlight& flight) {
  const double completed_at = wall_seconds();
  Stopwatch transform;
  const Bucket& bucket = buckets_[flight.bucket];
  hook_->finish(arena_.flat_grads().data<float>(), bucket, scale_);
  const double seconds = transform.seconds();
  if (timeline_) timeline_->add(span_names_[flight.bucket], "allreduce", flight.started_us, timeline_->now_us());
  std::lock_guard lock(mutex_);
  step_.comm_seconds += std::max(0.0, completed_at - flight.started_seconds);
  comm_intervals_[flight.bucket] = {flight.started_seconds, completed_at};
  step_.transform_seconds += seconds;
  ++completed_;
}

void GradientReducer::progress() {
  while (!in_flight_.empty() && in_flight_.front().work->test()) {
    complete(in_flight_.front());
    in_flight_.pop_front();
  }
  const auto limit = static_cast<size_t>(std::max(1, comm_.max_in_flight()));
  while (!ready_.empty() && in_flight_.size() < limit) {
    in_flight_.push_back(start(ready_.front()));
    ready_.pop_front();
  }
}

void GradientReducer::drain() {
  progress();
  while (!in_flight_.empty()) {
    wait_for(*in_flight_.front().work);
    complete(in_flight_.front());
    in_flight_.pop_front();
    progress();
  }
}

void GradientReducer::wait_for(comm::Work& work) const {
  // MPI's own wait spins in its progress engine: the lowest latency, and the only way a
  // nonblocking all-reduce advances between its rounds and fragments. Where this rank's
  // waiting thread has no core of its own, spinning would take the core a slower peer (or
  // backward) needs to catch up, so there the wait polls and sleeps between tests.
  if (spin_) {
    work.wait();
  } else {
    work.wait(comm::Work::Clock::time_point::max());
  }
}

void GradientReducer::finish() {
  const double backward_done = wall_seconds();
  while (launched_ < buckets_.size()) launch(launched_++);  // off, or backward ran without hooks
  if (mode_ == Overlap::kThread) {
    std::unique_lock lock(mutex_);
    work_done_.wait(lock, [this] { return completed_ == buckets_.size() || error_; });
    if (error_) std::rethrow_exception(error_);
  } else {
    drain();
  }
  {
    std::lock_guard lock(mutex_);
    stats_ = step_;
    // Each bucket's communication after backward ended, clipped to the bucket's interval:
    // never more than comm_seconds, whatever the wake-up latency of this thread.
    stats_.exposed_seconds = 0.0;
    for (const auto& [started, completed] : comm_intervals_)
      stats_.exposed_seconds += std::max(0.0, completed - std::max(started, backward_done));
  }
  stats_.bytes = 0;
  for (const auto& bucket : buckets_) stats_.bytes += bucket.numel() * static_cast<int64_t>(sizeof(float));
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
      InFlight flight = start(bucket);
      wait_for(*flight.work);
      complete(flight);
    } catch (...) {
      std::lock_guard lock(mutex_);
      error_ = std::current_exception();
    }
    work_done_.notify_all();
  }
}

}  // namespace mirrored::distribute
