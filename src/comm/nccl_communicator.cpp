#include "mirrored/comm/nccl_communicator.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <thread>

#include "mean.h"
#include "mirrored/comm/failure/abort.h"
#include "mirrored/comm/failure/fault_tolerance.h"
#include "mirrored/core/cuda_check.h"
#include "mirrored/core/cuda_resources.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/kernels/kernels.h"
#include "nccl_check.h"

namespace mirrored::comm {
namespace {
using Clock = std::chrono::steady_clock;

ncclDataType_t to_nccl(DataType type) {
  switch (type) {
    case DataType::kF32: return ncclFloat32;
    case DataType::kF64: return ncclFloat64;
    case DataType::kI32: return ncclInt32;
    case DataType::kI64: return ncclInt64;
    case DataType::kU8: return ncclUint8;
    case DataType::kBF16: return ncclBfloat16;
  }
  return ncclFloat32;
}

// kMean travels as a sum (see the header); the multiplication by 1/size() follows.
ncclRedOp_t to_nccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kMean: return ncclSum;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
  }
  return ncclSum;
}

bool on_device(const void* ptr) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    (void)cudaGetLastError();  // an unregistered host pointer is not an error worth keeping
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

// The collective timeout's clock. An event recorded on the communicator's stream just before
// the NCCL call completes when the stream reaches the collective: after the compute stream's
// work that the gate orders before it (backward's kernels) and after the collectives queued
// ahead of it (earlier buckets). The clock starts at the first poll that finds that event
// complete, so GPU compute never counts against collective_timeout_s; a slow poller starts
// it late by at most its own polling interval (never early). A rank whose stream never
// reaches the collective (a kernel that does not end) is caught by its peers, whose streams
// do reach theirs and time out.
class CollectiveClock {
 public:
  explicit CollectiveClock(int device) : reached_(device) {}
  void mark(cudaStream_t stream) const { reached_.record(stream); }
  // Seconds since the stream reached the mark (0 until a poll finds it there).
  double waited() {
    if (!since_) {
      if (!reached_.done()) return 0.0;
      since_ = Clock::now();
    }
    return seconds_since(*since_);
  }

 private:
  CudaEvent reached_;
  std::optional<Clock::time_point> since_;
};

struct NcclCommunicator::State {
  ncclComm_t comm = nullptr;
  int device = 0;
  double timeout = 0.0;
  CudaStream stream;
  CudaEvent gate;   // recorded on the compute stream: "the data is ready"
  CudaEvent done;   // recorded on our stream by the blocking collectives
  DeviceBuffer scratch;
  PinnedBuffer host_scratch;  // host side of staged copies: a device-to-pageable copy would
                              // block the thread outside the timeout's reach
  bool aborted = false;
  bool survive_failures = false;
  uint64_t revocations_at_start = 0;  // comm::revocations() when this communicator was made

  // survive_failures: a failure the process has seen on MPI since this communicator was
  // made (its peers in this collective may be among the lost).
  bool failure_seen() const { return survive_failures && revocations() != revocations_at_start; }

  // survive_failures: give up on this communicator and hand the failure to the recovery.
  [[noreturn]] void fail_over(const std::string& why) {
    rank_warning(str_cat(why, "; on_failure = shrink: aborting the NCCL communicator, the survivors shrink"));
    aborted = true;
    MIRRORED_NCCL_LOG(ncclCommAbort(comm));
    revoke_tracked_communicators();
    throw PeerFailure(why);
  }

  // `waited`: seconds the collective has waited (CollectiveClock, or host time while NCCL
  // takes a call). Warns once at half the timeout; ends the job at the timeout
  // (ncclCommAbort first, so no kernel of this communicator keeps spinning on the device),
  // or with survive_failures ends only the communicator.
  void check_deadline(const char* operation, size_t count, double waited, bool& warned) {
    if (failure_seen())
      fail_over(str_cat("NCCL ", operation, " (", count, " elements) on cuda:", device,
                        " abandoned: a peer failed (the job's MPI communicators were revoked)"));
    if (timeout <= 0) return;
    if (!warned && waited > timeout / 2) {
      warned = true;
      rank_warning(str_cat("collective warning: NCCL ", operation, " (", count, " elements) on cuda:", device,
                           " has waited ", static_cast<int>(waited), " s, half of collective_timeout_s = ", timeout,
                           " s; a peer rank may have stopped, died or issued a different collective"));
    }
    if (waited <= timeout) return;
    if (survive_failures)
      fail_over(str_cat("collective timeout: NCCL ", operation, " (", count, " elements) on cuda:", device,
                        " did not complete within ", timeout, " s"));
    rank_error(str_cat("collective timeout: NCCL ", operation, " (", count, " elements) on cuda:", device,
                       " did not complete within ", timeout, " s; a peer rank stopped, died or issued a different "
                       "collective. Aborting the NCCL communicator and the job (collective_timeout_s)."));
    aborted = true;
    MIRRORED_NCCL_LOG(ncclCommAbort(comm));
    abort_job(ExitCode::kCommTimeout);
  }

  // Throws on an asynchronous NCCL error; true while NCCL is still in progress.
  bool in_progress(const char* operation) {
    ncclResult_t state = ncclSuccess;
    MIRRORED_NCCL_CHECK(ncclCommGetAsyncError(comm, &state));
    if (state == ncclInProgress) return true;
    if (survive_failures && (state == ncclRemoteError || state == ncclSystemError))
      fail_over(str_cat("NCCL ", operation, ": asynchronous error: ", nccl_error_text(state),
                        " (a peer died or its network went away)"));
    if (state != ncclSuccess)
      throw_library_error(__FILE__, __LINE__, operation, str_cat("NCCL asynchronous error: ", nccl_error_text(state)));
    return false;
  }

  // Nonblocking NCCL: a call returns ncclInProgress until the communicator has taken it
  // (host-side work: joining peers at initialisation, connecting at a first collective), so
  // this wait is timed on the host from `started`.
  void await_ready(const char* operation, size_t count, Clock::time_point started) {
    bool warned = false;
    for (int polls = 0; in_progress(operation); pause_between_polls(polls))
      check_deadline(operation, count, seconds_since(started), warned);
  }

  // Gates our stream on the compute stream's work so far, marks where the collective starts
  // (its timeout counts from there), issues one NCCL call on the stream and waits until NCCL
  // accepted the call.
  template <typename Launch>
  std::unique_ptr<CollectiveClock> enqueue(const char* operation, size_t count, Launch&& launch) {
    set_cuda_device(device);
    gate.record(compute_stream(device));
    MIRRORED_CUDA_CHECK(cudaStreamWaitEvent(stream.get(), gate.get(), 0));
    auto clock = std::make_unique<CollectiveClock>(device);
    clock->mark(stream.get());
    const auto started = Clock::now();
    const ncclResult_t result = launch();
    if (result != ncclSuccess && result != ncclInProgress)
      throw_library_error(__FILE__, __LINE__, operation, nccl_error_text(result));
    await_ready(operation, count, started);
    return clock;
  }

  // Waits for everything queued on our stream so far, under the timeout of the collective
  // that `clock` marks.
  void wait_for_stream(const char* operation, size_t count, CollectiveClock& clock) {
    done.record(stream.get());
    bool warned = false;
    for (int polls = 0; !done.done(); pause_between_polls(polls)) {
      (void)in_progress(operation);  // throws on an asynchronous error
      check_deadline(operation, count, clock.waited(), warned);
    }
  }
};

// A device all-reduce in flight: its completion event and the communicator to poll.
class NcclWork final : public Work {
 public:
  // `buffer` and `count`: what a mean divides once the collective is complete; `clock`:
  // from State::enqueue, where the stream reaches the collective.
  NcclWork(NcclCommunicator::State& state, const char* operation, std::unique_ptr<CollectiveClock> clock,
           void* buffer, size_t count, ReduceOp op, int ranks)
      : state_(state), operation_(operation), buffer_(buffer), count_(count), op_(op), ranks_(ranks),
        done_event_(state.device), clock_(std::move(clock)) {
    done_event_.record(state_.stream.get());
  }
  ~NcclWork() override {
    if (!complete_ && std::uncaught_exceptions() == 0)
      rank_warning(str_cat("an NCCL ", operation_, " was dropped while in flight"));
  }
  bool test() override {
    if (complete_) return true;
    if (!done_event_.done()) {
      (void)state_.in_progress(operation_);  // throws on an asynchronous error
      state_.check_deadline(operation_, count_, clock_->waited(), warned_);
      return false;
    }
    // The sum is complete; a mean's scaling (times 1.0f / ranks) queued now on the compute
    // stream is ordered before any later kernel that reads the buffer.
    if (op_ == ReduceOp::kMean && ranks_ > 1)
      kernels::scale(static_cast<float*>(buffer_), static_cast<int64_t>(count_), Device::cuda(state_.device),
                     1.0f / static_cast<float>(ranks_));
    complete_ = true;
    return true;
  }

 private:
  NcclCommunicator::State& state_;
  const char* operation_;
  void* buffer_;
  size_t count_;
  ReduceOp op_;
  int ranks_;
  CudaEvent done_event_;
  std::unique_ptr<CollectiveClock> clock_;
  bool warned_ = false;
  bool complete_ = false;
};

NcclCommunicator::NcclCommunicator(Communicator& bootstrap, int device, double timeout_seconds,
                                   bool survive_failures)
    : device_(device), timeout_(timeout_seconds), rank_(bootstrap.rank()), size_(bootstrap.size()),
      state_(std::make_unique<State>()) {
  state_->device = device_;
  state_->timeout = timeout_;
  state_->survive_failures = survive_failures;
  state_->revocations_at_start = revocations();
  set_cuda_device(device_);
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (rank_ == 0) MIRRORED_NCCL_CHECK(ncclGetUniqueId(&id));
  bootstrap.broadcast(reinterpret_cast<uint8_t*>(&id), sizeof(id), 0);
  // Nonblocking, so a peer that never joins cannot hang initialisation past the timeout.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const auto started = Clock::now();
  const ncclResult_t result = ncclCommInitRankConfig(&state_->comm, size_, id, rank_, &config);
  if (result != ncclSuccess && result != ncclInProgress)
    throw_library_error(__FILE__, __LINE__, "ncclCommInitRankConfig", nccl_error_text(result));
  state_->await_ready("initialisation", 0, started);
  state_->stream = CudaStream(device_, /*non_blocking=*/true);
  state_->gate = CudaEvent(device_);
  state_->done = CudaEvent(device_);
}

NcclCommunicator::~NcclCommunicator() {
  if (!state_ || !state_->comm || state_->aborted) return;
  // While an error unwinds towards MPI_Abort, or after peers were lost, they may never join
  // a synchronising teardown: abort (local, non-blocking) instead of destroy.
  if (std::uncaught_exceptions() > 0 || state_->failure_seen()) {
    MIRRORED_NCCL_LOG(ncclCommAbort(state_->comm));
    return;
  }
  // Nonblocking communicator: finalize flushes outstanding work and reports progress like
  // any other call; destroy then frees it.
  ncclResult_t result = ncclCommFinalize(state_->comm);
  if (result == ncclSuccess || result == ncclInProgress) {
    try {
      state_->await_ready("finalize", 0, Clock::now());
    } catch (const std::exception& e) {
      rank_warning(str_cat("NCCL finalize: ", e.what()));
    }
  } else {
    log_library_error(__FILE__, __LINE__, "ncclCommFinalize", nccl_error_text(result));
  }
  MIRRORED_NCCL_LOG(ncclCommDestroy(state_->comm));
}

int NcclCommunicator::version() {
  int v = 0;
  MIRRORED_NCCL_CHECK(ncclGetVersion(&v));
  return v;
}

void* NcclCommunicator::staging(size_t bytes) {
  if (state_->scratch.bytes() < bytes) state_->scratch = DeviceBuffer(std::max<size_t>(bytes, 256), device_);
  if (state_->host_scratch.bytes() < bytes) state_->host_scratch = PinnedBuffer(std::max<size_t>(bytes, 256));
  return state_->scratch.data();
}

void NcclCommunicator::stage_in(void* dev, const void* host, size_t bytes) {
  std::memcpy(state_->host_scratch.data(), host, bytes);
  MIRRORED_CUDA_CHECK(
      cudaMemcpyAsync(dev, state_->host_scratch.data(), bytes, cudaMemcpyHostToDevice, state_->stream.get()));
}

void NcclCommunicator::stage_out_and_wait(void* host, const void* dev, size_t bytes, const char* operation,
                                          size_t count, CollectiveClock& clock) {
  MIRRORED_CUDA_CHECK(
      cudaMemcpyAsync(state_->host_scratch.data(), dev, bytes, cudaMemcpyDeviceToHost, state_->stream.get()));
  state_->wait_for_stream(operation, count, clock);
  std::memcpy(host, state_->host_scratch.data(), bytes);
}

std::unique_ptr<Work> NcclCommunicator::allreduce_async(void* buffer, size_t count, DataType type, ReduceOp op) {
  if (!on_device(buffer)) return Communicator::allreduce_async(buffer, count, type, op);  // staged, blocking
  MIRRORED_CHECK(op != ReduceOp::kMean || type == DataType::kF32, "NCCL mean all-reduce of ", datatype_name(type),
                 " device buffers (float only)");
  State& s = *state_;
  auto clock = s.enqueue("allreduce", count, [&] {
    return ncclAllReduce(buffer, buffer, count, to_nccl(type), to_nccl(op), s.comm, s.stream.get());
  });
  return std::make_unique<NcclWork>(s, "allreduce", std::move(clock), buffer, count, op, size_);
}

void NcclCommunicator::allreduce(void* buffer, size_t count, DataType type, ReduceOp op) {
  if (on_device(buffer)) {
    allreduce_async(buffer, count, type, op)->wait();
    return;
  }
  MIRRORED_CHECK(op != ReduceOp::kMean || type == DataType::kF32 || type == DataType::kF64 ||
                     type == DataType::kBF16,
                 "mean all-reduce of ", datatype_name(type));
  const size_t bytes = count * datatype_size(type);
  State& s = *state_;
  void* dev = staging(bytes);
  stage_in(dev, buffer, bytes);
  auto clock = s.enqueue(
      "allreduce", count, [&] { return ncclAllReduce(dev, dev, count, to_nccl(type), to_nccl(op), s.comm, s.stream.get()); });
  stage_out_and_wait(buffer, dev, bytes, "allreduce", count, *clock);
  mean_from_sum(buffer, count, type, op, size_);
}

void NcclCommunicator::broadcast(void* buffer, size_t count, DataType type, int root) {
  const size_t bytes = count * datatype_size(type);
  const bool device_buffer = on_device(buffer);
  State& s = *state_;
  void* dev = device_buffer ? buffer : staging(bytes);
  if (!device_buffer) stage_in(dev, buffer, bytes);
  auto clock = s.enqueue(
      "broadcast", count, [&] { return ncclBroadcast(dev, dev, count, to_nccl(type), root, s.comm, s.stream.get()); });
  if (!device_buffer) return stage_out_and_wait(buffer, dev, bytes, "broadcast", count, *clock);
  s.wait_for_stream("broadcast", count, *clock);
}

void NcclCommunicator::allgather(const void* send, void* recv, size_t count, DataType type) {
  const size_t bytes = count * datatype_size(type);
  const size_t total = bytes * static_cast<size_t>(size_);
  State& s = *state_;
  if (on_device(send) && on_device(recv)) {
    auto clock = s.enqueue(
        "allgather", count, [&] { return ncclAllGather(send, recv, count, to_nccl(type), s.comm, s.stream.get()); });
    s.wait_for_stream("allgather", count, *clock);
    return;
  }
  // Staged through device memory: [send | recv] in one scratch block.
  auto* base = static_cast<char*>(staging(bytes + total));
  if (on_device(send)) {
    // After the compute stream's writes to `send`: enqueue() gates the stream before the
    // NCCL call, so the copy goes through the gate first.
    set_cuda_device(device_);
    s.gate.record(compute_stream(device_));
    MIRRORED_CUDA_CHECK(cudaStreamWaitEvent(s.stream.get(), s.gate.get(), 0));
    MIRRORED_CUDA_CHECK(cudaMemcpyAsync(base, send, bytes, cudaMemcpyDeviceToDevice, s.stream.get()));
  } else {
    stage_in(base, send, bytes);
  }
  auto clock = s.enqueue("allgather", count, [&] {
    return ncclAllGather(base, base + bytes, count, to_nccl(type), s.comm, s.stream.get());
  });
  if (on_device(recv)) {
    MIRRORED_CUDA_CHECK(cudaMemcpyAsync(recv, base + bytes, total, cudaMemcpyDeviceToDevice, s.stream.get()));
    s.wait_for_stream("allgather", count, *clock);
  } else {
    stage_out_and_wait(recv, base + bytes, total, "allgather", count, *clock);
  }
}

namespace {
bool all_equal(const std::vector<size_t>& counts) {
  return std::all_of(counts.begin(), counts.end(), [&](size_t c) { return c == counts.front(); });
}
}  // namespace

// Equal pieces: ncclReduceScatter. Unequal: one ncclReduce per piece to its owner, grouped
// into a single launch (NCCL has no variable-count reduce-scatter).
std::unique_ptr<Work> NcclCommunicator::reduce_scatter_async(const void* send, void* recv,
                                                             const std::vector<size_t>& counts, DataType type,
                                                             ReduceOp op) {
  MIRRORED_CHECK(on_device(send) && on_device(recv), "NCCL reduce-scatter needs device buffers");
  MIRRORED_CHECK(op != ReduceOp::kMean || type == DataType::kF32, "NCCL mean reduce-scatter of ",
                 datatype_name(type), " (float only)");
  const auto offsets = piece_offsets(counts, size_, "reduce-scatter");
  const size_t bytes = datatype_size(type);
  State& s = *state_;
  const size_t total = offsets.back();
  auto clock = s.enqueue("reduce-scatter", total, [&] {
    if (all_equal(counts))
      return ncclReduceScatter(send, recv, counts.front(), to_nccl(type), to_nccl(op), s.comm, s.stream.get());
    ncclResult_t result = ncclGroupStart();
    for (int r = 0; r < size_ && (result == ncclSuccess || result == ncclInProgress); ++r)
      result = ncclReduce(static_cast<const char*>(send) + offsets[static_cast<size_t>(r)] * bytes, recv,
                          counts[static_cast<size_t>(r)], to_nccl(type), to_nccl(op), r, s.comm, s.stream.get());
    const ncclResult_t ended = ncclGroupEnd();
    return result == ncclSuccess || result == ncclInProgress ? ended : result;
  });
  return std::make_unique<NcclWork>(s, "reduce-scatter", std::move(clock), recv, counts[static_cast<size_t>(rank_)], op,
                                    size_);
}

// In place: ncclReduceScatter's in-place form (the piece at its own offset), or one in-place
// ncclReduce per piece to its owner.
std::unique_ptr<Work> NcclCommunicator::reduce_scatter_inplace_async(void* buffer, const std::vector<size_t>& counts,
                                                                     DataType type, ReduceOp op) {
  MIRRORED_CHECK(on_device(buffer), "NCCL reduce-scatter in place needs a device buffer");
  MIRRORED_CHECK(op != ReduceOp::kMean || type == DataType::kF32, "NCCL mean reduce-scatter of ",
                 datatype_name(type), " (float only)");
  const auto offsets = piece_offsets(counts, size_, "reduce-scatter");
  const size_t bytes = datatype_size(type);
  auto* base = static_cast<char*>(buffer);
  char* mine = base + offsets[static_cast<size_t>(rank_)] * bytes;
  State& s = *state_;
  const size_t total = offsets.back();
  auto clock = s.enqueue("reduce-scatter", total, [&] {
    if (all_equal(counts))
      return ncclReduceScatter(base, mine, counts.front(), to_nccl(type), to_nccl(op), s.comm, s.stream.get());
    ncclResult_t result = ncclGroupStart();
    for (int r = 0; r < size_ && (result == ncclSuccess || result == ncclInProgress); ++r) {
      char* piece = base + offsets[static_cast<size_t>(r)] * bytes;
      result = ncclReduce(piece, piece, counts[static_cast<size_t>(r)], to_nccl(type), to_nccl(op), r, s.comm,
                          s.stream.get());
    }
    const ncclResult_t ended = ncclGroupEnd();
    return result == ncclSuccess || result == ncclInProgress ? ended : result;
  });
  return std::make_unique<NcclWork>(s, "reduce-scatter", std::move(clock), mine, counts[static_cast<size_t>(rank_)], op,
                                    size_);
}

// Equal pieces: ncclAllGather in place. Unequal: one in-place ncclBroadcast per piece from
// its owner, grouped.
std::unique_ptr<Work> NcclCommunicator::allgather_inplace_async(void* buffer, const std::vector<size_t>& counts,
                                                                DataType type) {
  MIRRORED_CHECK(on_device(buffer), "NCCL all-gather in place needs a device buffer");
  const auto offsets = piece_offsets(counts, size_, "all-gather");
  const size_t bytes = datatype_size(type);
  auto* base = static_cast<char*>(buffer);
  State& s = *state_;
  const size_t total = offsets.back();
  auto clock = s.enqueue("all-gather", total, [&] {
    if (all_equal(counts))
      return ncclAllGather(base + offsets[static_cast<size_t>(rank_)] * bytes, base, counts.front(), to_nccl(type),
                           s.comm, s.stream.get());
    ncclResult_t result = ncclGroupStart();
    for (int r = 0; r < size_ && (result == ncclSuccess || result == ncclInProgress); ++r) {
      char* piece = base + offsets[static_cast<size_t>(r)] * bytes;
      result = ncclBroadcast(piece, piece, counts[static_cast<size_t>(r)], to_nccl(type), r, s.comm, s.stream.get());
    }
    const ncclResult_t ended = ncclGroupEnd();
    return result == ncclSuccess || result == ncclInProgress ? ended : result;
  });
  return std::make_unique<NcclWork>(s, "all-gather", std::move(clock), buffer, total, ReduceOp::kSum, size_);
}

void NcclCommunicator::barrier() {
  // NCCL has no barrier: an all-reduce of one value completes only when every rank joined.
  int32_t token = 0;
  allreduce(&token, 1, DataType::kI32, ReduceOp::kSum);
}

}  // namespace mirrored::comm
