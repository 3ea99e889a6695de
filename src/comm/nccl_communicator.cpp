#include "mirrored/comm/nccl_communicator.h"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <thread>

#include "mirrored/core/cuda_check.h"
#include "mirrored/core/cuda_resources.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
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

ncclRedOp_t to_nccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kMean: return ncclAvg;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
  }
  return ncclSum;
}

bool is_floating(DataType type) {
  return type == DataType::kF32 || type == DataType::kF64 || type == DataType::kBF16;
}

bool on_device(const void* ptr) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    (void)cudaGetLastError();  // an unregistered host pointer is not an error worth keeping
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}
}  // namespace

struct NcclCommunicator::State {
  ncclComm_t comm = nullptr;
  CudaStream stream;
  CudaEvent gate;   // recorded on the compute stream: "the data is ready"
  CudaEvent done;   // recorded on our stream: "the collective finished"
  DeviceBuffer scratch;
  PinnedBuffer host_scratch;  // host side of staged copies: a device-to-pageable copy would
                              // block the thread outside the timeout's reach
  bool aborted = false;
};

NcclCommunicator::NcclCommunicator(Communicator& bootstrap, int device, double timeout_seconds)
    : bootstrap_(bootstrap), device_(device), timeout_(timeout_seconds), rank_(bootstrap.rank()),
      size_(bootstrap.size()), state_(std::make_unique<State>()) {
  set_cuda_device(device_);
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (rank_ == 0) MIRRORED_NCCL_CHECK(ncclGetUniqueId(&id));
  bootstrap_.broadcast(reinterpret_cast<uint8_t*>(&id), sizeof(id), 0);
  MIRRORED_NCCL_CHECK(ncclCommInitRank(&state_->comm, size_, id, rank_));
  state_->stream = CudaStream(device_, /*non_blocking=*/true);
  state_->gate = CudaEvent(device_);
  state_->done = CudaEvent(device_);
}

NcclCommunicator::~NcclCommunicator() {
  if (!state_ || !state_->comm || state_->aborted) return;
  // While an error unwinds towards MPI_Abort, peers may never join a synchronising
  // teardown: abort (local, non-blocking) instead of destroy.
  if (std::uncaught_exceptions() > 0) {
    MIRRORED_NCCL_LOG(ncclCommAbort(state_->comm));
  } else {
    MIRRORED_NCCL_LOG(ncclCommDestroy(state_->comm));
  }
}

std::unique_ptr<Communicator> NcclCommunicator::duplicate() {
  return std::make_unique<NcclCommunicator>(bootstrap_, device_, timeout_);
}

cudaStream_t NcclCommunicator::stream() const { return state_->stream.get(); }

int NcclCommunicator::version() {
  int v = 0;
  MIRRORED_NCCL_CHECK(ncclGetVersion(&v));
  return v;
}

void NcclCommunicator::wait_for(cudaEvent_t ready) {
  set_cuda_device(device_);
  MIRRORED_CUDA_CHECK(cudaStreamWaitEvent(state_->stream.get(), ready, 0));
}

void NcclCommunicator::gate_on_compute_stream() {
  state_->gate.record(compute_stream(device_));
  wait_for(state_->gate.get());
}

void NcclCommunicator::enqueue_allreduce(void* device_buffer, size_t count, DataType type, ReduceOp op) {
  MIRRORED_CHECK(op != ReduceOp::kMean || is_floating(type), "mean all-reduce of ", datatype_name(type));
  set_cuda_device(device_);
  MIRRORED_NCCL_CHECK(ncclAllReduce(device_buffer, device_buffer, count, to_nccl(type), to_nccl(op), state_->comm,
                                    state_->stream.get()));
}

void NcclCommunicator::synchronize(const char* operation, size_t count) {
  state_->done.record(state_->stream.get());
  const auto started = Clock::now();
  int polls = 0;
  while (!state_->done.done()) {
    ncclResult_t async_error = ncclSuccess;
    MIRRORED_NCCL_CHECK(ncclCommGetAsyncError(state_->comm, &async_error));
    if (async_error != ncclSuccess && async_error != ncclInProgress)
      throw_library_error(__FILE__, __LINE__, operation, str_cat("NCCL asynchronous error: ", nccl_error_text(async_error)));
    const double waited = std::chrono::duration<double>(Clock::now() - started).count();
    if (timeout_ > 0 && waited > timeout_) {
      rank_error(str_cat("collective timeout: NCCL ", operation, " (", count, " elements) on cuda:", device_,
                         " did not complete within ", timeout_, " s; a peer rank stopped, died or issued a different "
                         "collective. Aborting the NCCL communicator and the job (collective_timeout_s)."));
      std::fflush(stderr);
      state_->aborted = true;
      MIRRORED_NCCL_LOG(ncclCommAbort(state_->comm));
      int initialized = 0, finalized = 0;
      MPI_Initialized(&initialized);
      MPI_Finalized(&finalized);
      if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, static_cast<int>(ExitCode::kCommTimeout));
      std::_Exit(static_cast<int>(ExitCode::kCommTimeout));
    }
    // Spin briefly (small collectives finish in microseconds), then back off so a long
    // wait does not burn a core the data loader could use.
    if (++polls < 2000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
}

void* NcclCommunicator::staging(size_t bytes) {
  if (state_->scratch.bytes() < bytes) state_->scratch = DeviceBuffer(std::max<size_t>(bytes, 256), device_);
  if (state_->host_scratch.bytes() < bytes) state_->host_scratch = PinnedBuffer(std::max<size_t>(bytes, 256));
  return state_->scratch.data();
}

void NcclCommunicator::stage_in(void* dev, const void* host, size_t bytes) {
  std::memcpy(state_->host_scratch.data(), host, bytes);
  MIRRORED_CUDA_CHECK(cudaMemcpyAsync(dev, state_->host_scratch.data(), bytes, cudaMemcpyHostToDevice, stream()));
}

void NcclCommunicator::stage_out_and_wait(void* host, const void* dev, size_t bytes, const char* operation,
                                          size_t count) {
  MIRRORED_CUDA_CHECK(cudaMemcpyAsync(state_->host_scratch.data(), dev, bytes, cudaMemcpyDeviceToHost, stream()));
  synchronize(operation, count);
  std::memcpy(host, state_->host_scratch.data(), bytes);
}

void NcclCommunicator::allreduce(void* buffer, size_t count, DataType type, ReduceOp op) {
  const size_t bytes = count * datatype_size(type);
  gate_on_compute_stream();
  if (on_device(buffer)) {
    enqueue_allreduce(buffer, count, type, op);
  } else {
    void* dev = staging(bytes);
    stage_in(dev, buffer, bytes);
    enqueue_allreduce(dev, count, type, op);
    stage_out_and_wait(buffer, dev, bytes, "allreduce", count);
    return;
  }
  synchronize("allreduce", count);
}

void NcclCommunicator::broadcast(void* buffer, size_t count, DataType type, int root) {
  const size_t bytes = count * datatype_size(type);
  gate_on_compute_stream();
  const bool device_buffer = on_device(buffer);
  void* dev = device_buffer ? buffer : staging(bytes);
  if (!device_buffer) stage_in(dev, buffer, bytes);
  MIRRORED_NCCL_CHECK(ncclBroadcast(dev, dev, count, to_nccl(type), root, state_->comm, stream()));
  if (!device_buffer) return stage_out_and_wait(buffer, dev, bytes, "broadcast", count);
  synchronize("broadcast", count);
}

void NcclCommunicator::allgather(const void* send, void* recv, size_t count, DataType type) {
  const size_t bytes = count * datatype_size(type);
  const size_t total = bytes * static_cast<size_t>(size_);
  gate_on_compute_stream();
  if (on_device(send) && on_device(recv)) {
    MIRRORED_NCCL_CHECK(ncclAllGather(send, recv, count, to_nccl(type), state_->comm, stream()));
    synchronize("allgather", count);
    return;
  }
  // Staged through device memory: [send | recv] in one scratch block.
  auto* base = static_cast<char*>(staging(bytes + total));
  if (on_device(send)) {
    MIRRORED_CUDA_CHECK(cudaMemcpyAsync(base, send, bytes, cudaMemcpyDeviceToDevice, stream()));
  } else {
    stage_in(base, send, bytes);
  }
  MIRRORED_NCCL_CHECK(ncclAllGather(base, base + bytes, count, to_nccl(type), state_->comm, stream()));
  if (on_device(recv)) {
    MIRRORED_CUDA_CHECK(cudaMemcpyAsync(recv, base + bytes, total, cudaMemcpyDeviceToDevice, stream()));
    synchronize("allgather", count);
  } else {
    stage_out_and_wait(recv, base + bytes, total, "allgather", count);
  }
}

void NcclCommunicator::barrier() {
  // NCCL has no barrier: an all-reduce of one value completes only when every rank joined.
  int32_t token = 0;
  allreduce(&token, 1, DataType::kI32, ReduceOp::kSum);
}

}  // namespace mirrored::comm
