#pragma once
// The collective operations a data-parallel job needs, behind one small interface.
// Backends: MpiCommunicator (host buffers), LocalCommunicator (a world of one, no MPI),
// and NCCL (device buffers) in the CUDA build. Counts are in elements, never bytes.
//
// Every rank must issue the same collectives in the same order.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mirrored::comm {

// kBF16: bfloat16 stored as uint16 (the upper half of a float32); sums are formed in
// float32 and rounded to nearest-even, for compressed gradient traffic.
enum class DataType { kF32, kF64, kI32, kI64, kU8, kBF16 };
enum class ReduceOp { kSum, kMean, kMax, kMin };
size_t datatype_size(DataType type);
const char* datatype_name(DataType type);

template <typename T> constexpr DataType datatype_of();
template <> constexpr DataType datatype_of<float>() { return DataType::kF32; }
template <> constexpr DataType datatype_of<double>() { return DataType::kF64; }
template <> constexpr DataType datatype_of<int32_t>() { return DataType::kI32; }
template <> constexpr DataType datatype_of<int64_t>() { return DataType::kI64; }
template <> constexpr DataType datatype_of<uint8_t>() { return DataType::kU8; }
template <> constexpr DataType datatype_of<char>() { return DataType::kU8; }

// A collective in flight, for every backend (PyTorch c10d's Work). The buffer it was given
// stays untouched until the collective is complete. Dropping an incomplete one is a
// programming error.
//
// Whatever the caller waits for, the job's collective timeout still holds: a collective
// that outlives it ends the job (exit 5) through the backend's watchdog (MPI) or its own
// polling (NCCL), naming what stalled.
class Work {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~Work() = default;
  // Advances the collective without blocking; true once it is complete (and from then on).
  virtual bool test() = 0;
  // Blocks until the collective is complete (true) or `deadline` passes (false: still in
  // flight, wait again later). The default polls test(): a few hundred immediate tries,
  // then short sleeps, so a wait for slow peers leaves its core to the other threads.
  virtual bool wait(Clock::time_point deadline);
  // Blocks until complete, in the backend's quickest way (MPI: MPI_Wait, which may spin):
  // for a thread with nothing else to do.
  virtual void wait() { wait(Clock::time_point::max()); }
};

// A handle that is complete from the start, for collectives a backend runs at once.
std::unique_ptr<Work> completed_work();

// The one wait policy of every backend's polling wait: a few hundred immediate tries catch
// collectives that are about to complete (microseconds), then short sleeps, so a long wait
// for slow peers leaves its core to the threads that compute. `polls` counts the tries.
void pause_between_polls(int& polls);

// Where each rank's piece lies in a buffer cut into pieces of counts[r] elements: the
// prefix sums of `counts` (counts.size() + 1 entries; the last is the total). Checked
// against `ranks`, the communicator's size, naming `operation`.
std::vector<size_t> piece_offsets(const std::vector<size_t>& counts, int ranks, const char* operation);

// What a backend can do. Callers ask for a capability, never compare backend() names: a
// third backend then works wherever its capabilities say it may.
struct Capabilities {
  bool device_buffers = false;       // buffers may live in GPU memory (NCCL)
  bool nonblocking = false;          // allreduce_async returns before the collective completes
  bool sharded_collectives = false;  // reduce_scatter(_inplace)_async and allgather_inplace_async
  bool point_to_point = false;       // sendrecv
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "mpi", "mpi-hierarchical", "local", "nccl": for messages
  virtual Capabilities capabilities() const = 0;

  // In place. kMean is defined for floating types only: the sum over ranks, then that sum
  // times 1/size(), the reciprocal rounded to the buffer's type (bf16: the sum widened to
  // float, times 1.0f/size(), rounded to bf16 once). That product may differ from
  // sum / size() in the last bit; every backend forms it the same way (comm/mean.h).
  // Never each input scaled before the sum, whose rounding differs more.
  virtual void allreduce(void* buffer, size_t count, DataType type, ReduceOp op) = 0;
  // Starts an all-reduce and returns its handle at once. The default runs the blocking
  // one and returns a completed handle (backends without a nonblocking path). Handles of
  // one communicator complete in the order they were started; a backend may limit how
  // many are in flight at once (max_in_flight()).
  virtual std::unique_ptr<Work> allreduce_async(void* buffer, size_t count, DataType type, ReduceOp op);
  // How many nonblocking collectives may be in flight on this communicator at once.
  virtual int max_in_flight() const { return 1 << 20; }
  virtual void broadcast(void* buffer, size_t count, DataType type, int root) = 0;
  // recv holds size() * count elements, rank r's contribution at r * count.
  virtual void allgather(const void* send, void* recv, size_t count, DataType type) = 0;
  virtual void barrier() = 0;

  // Variable-count collectives for sharded state (ZeRO): counts[r] elements belong to rank
  // r, at offset counts[0] + ... + counts[r-1] of the full buffer; `counts` has size()
  // entries, the same on every rank. A backend without them (capabilities().
  // sharded_collectives false) throws.
  //
  // Reduce-scatter: `send` holds the full buffer on every rank; rank r receives in `recv`
  // (counts[rank()] elements, not overlapping `send`) the reduction over ranks of its piece.
  // kMean as for allreduce: the sum, then times 1/size(). MPI runs it as a ring of
  // point-to-point messages (mpi_ring_reduce_scatter.h says why); NCCL uses
  // ncclReduceScatter for equal counts and one ncclReduce per piece otherwise.
  virtual std::unique_ptr<Work> reduce_scatter_async(const void* send, void* recv, const std::vector<size_t>& counts,
                                                     DataType type, ReduceOp op);
  void reduce_scatter(const void* send, void* recv, const std::vector<size_t>& counts, DataType type, ReduceOp op) {
    reduce_scatter_async(send, recv, counts, type, op)->wait();
  }
  // The same in place: `buffer` holds the full buffer; afterwards this rank's piece of it
  // (at its offset) holds the reduction, the rest of `buffer` is undefined. Saves the
  // receive buffer (sharded gradients are reduced where they lie).
  virtual std::unique_ptr<Work> reduce_scatter_inplace_async(void* buffer, const std::vector<size_t>& counts,
                                                             DataType type, ReduceOp op);
  // All-gather in place: rank r's piece already sits at its offset of `buffer`; afterwards
  // every rank's `buffer` holds every piece (MPI_Allgatherv with MPI_IN_PLACE).
  virtual std::unique_ptr<Work> allgather_inplace_async(void* buffer, const std::vector<size_t>& counts,
                                                        DataType type);
  void allgather_inplace(void* buffer, const std::vector<size_t>& counts, DataType type) {
    allgather_inplace_async(buffer, counts, type)->wait();
  }

  // Point to point, blocking: sends `send_count` elements to rank `dest` and receives
  // `recv_count` from rank `source` (host buffers). Every rank calls it at the same point,
  // and the sends form a permutation of the ranks (e.g. each rank to rank + d mod size()),
  // so it is collective in effect and the watchdog treats it as one. A backend without
  // it (capabilities().point_to_point false) throws.
  virtual void sendrecv(const void* send, size_t send_count, int dest, void* recv, size_t recv_count, int source,
                        DataType type);
  // The same, nonblocking: both buffers belong to MPI until the handle completes. Every rank
  // completes its handle before its next sendrecv. The default runs the blocking one.
  virtual std::unique_ptr<Work> sendrecv_async(const void* send, size_t send_count, int dest, void* recv,
                                               size_t recv_count, int source, DataType type);

  // Typed conveniences.
  template <typename T>
  void allreduce(T* buffer, size_t count, ReduceOp op) {
    allreduce(static_cast<void*>(buffer), count, datatype_of<T>(), op);
  }
  template <typename T>
  T allreduce_value(T value, ReduceOp op) {
    allreduce(&value, 1, op);
    return value;
  }
  template <typename T>
  void broadcast(T* buffer, size_t count, int root) {
    broadcast(static_cast<void*>(buffer), count, datatype_of<T>(), root);
  }
  template <typename T>
  std::vector<T> allgather_value(const T& value) {
    std::vector<T> all(static_cast<size_t>(size()));
    allgather(static_cast<const void*>(&value), all.data(), 1, datatype_of<T>());
    return all;
  }
  // Every rank receives every rank's string (any lengths).
  std::vector<std::string> allgather_strings(const std::string& value);
  // Rank `root`'s string on every rank.
  std::string broadcast_string(const std::string& value, int root);
};

}  // namespace mirrored::comm
