#pragma once
// The collective operations a data-parallel job needs, behind one small interface.
// Backends: MpiCommunicator (host buffers), LocalCommunicator (a world of one, no MPI),
// and NCCL (device buffers) in the CUDA build. Counts are in elements, never bytes.
//
// Every rank must issue the same collectives in the same order.
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

const char* reduce_op_name(ReduceOp op);

template <typename T> constexpr DataType datatype_of();
template <> constexpr DataType datatype_of<float>() { return DataType::kF32; }
template <> constexpr DataType datatype_of<double>() { return DataType::kF64; }
template <> constexpr DataType datatype_of<int32_t>() { return DataType::kI32; }
template <> constexpr DataType datatype_of<int64_t>() { return DataType::kI64; }
template <> constexpr DataType datatype_of<uint8_t>() { return DataType::kU8; }
template <> constexpr DataType datatype_of<char>() { return DataType::kU8; }

// A collective in flight. test() advances it and returns true once it is complete (and
// keeps returning true). Dropping an incomplete one is a programming error.
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  virtual bool test() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "mpi", "local", "nccl"
  // A communicator over the same ranks whose traffic never mixes with this one's, so
  // another thread can run its own sequence of collectives. Collective.
  virtual std::unique_ptr<Communicator> duplicate() = 0;

  // In place. kMean is defined for floating types only (sum, then divide by size()).
  virtual void allreduce(void* buffer, size_t count, DataType type, ReduceOp op) = 0;
  // Starts an all-reduce and returns at once; the buffer must stay untouched until test()
  // says it is complete. The default runs the blocking one (backends without a
  // nonblocking path).
  virtual std::unique_ptr<PendingCollective> allreduce_async(void* buffer, size_t count, DataType type, ReduceOp op);
  virtual void broadcast(void* buffer, size_t count, DataType type, int root) = 0;
  // recv holds size() * count elements, rank r's contribution at r * count.
  virtual void allgather(const void* send, void* recv, size_t count, DataType type) = 0;
  virtual void barrier() = 0;

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
