#include "mirrored/comm/communicator.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "mirrored/core/error.h"
#include "mirrored/core/strings.h"

namespace mirrored::comm {

size_t datatype_size(DataType type) {
  switch (type) {
    case DataType::kF32: return 4;
    case DataType::kF64: return 8;
    case DataType::kI32: return 4;
    case DataType::kI64: return 8;
    case DataType::kU8: return 1;
    case DataType::kBF16: return 2;
  }
  return 0;
}

const char* datatype_name(DataType type) {
  switch (type) {
    case DataType::kF32: return "float";
    case DataType::kF64: return "double";
    case DataType::kI32: return "int32";
    case DataType::kI64: return "int64";
    case DataType::kU8: return "uint8";
    case DataType::kBF16: return "bfloat16";
  }
  return "?";
}

namespace {
class CompletedWork final : public Work {
 public:
  bool test() override { return true; }
  bool wait(Clock::time_point) override { return true; }
};

constexpr int kTriesBeforeSleeping = 200;
constexpr auto kPollInterval = std::chrono::microseconds(50);
}  // namespace

std::unique_ptr<Work> completed_work() { return std::make_unique<CompletedWork>(); }

void pause_between_polls(int& polls) {
  if (++polls > kTriesBeforeSleeping) std::this_thread::sleep_for(kPollInterval);
}

std::vector<size_t> piece_offsets(const std::vector<size_t>& counts, int ranks, const char* operation) {
  MIRRORED_CHECK(counts.size() == static_cast<size_t>(ranks), operation, " with ", counts.size(), " counts over ",
                 ranks, " ranks");
  std::vector<size_t> offsets{0};
  for (const size_t count : counts) offsets.push_back(offsets.back() + count);
  return offsets;
}

bool Work::wait(Clock::time_point deadline) {
  for (int polls = 0; !test(); pause_between_polls(polls)) {
    if (Clock::now() >= deadline) return false;
  }
  return true;
}

std::unique_ptr<Work> Communicator::allreduce_async(void* buffer, size_t count, DataType type, ReduceOp op) {
  allreduce(buffer, count, type, op);
  return std::make_unique<CompletedWork>();
}

std::unique_ptr<Work> Communicator::reduce_scatter_async(const void*, void*, const std::vector<size_t>&, DataType,
                                                        ReduceOp) {
  throw Error(ExitCode::kFailure, str_cat("the '", backend(), "' communicator has no reduce-scatter"));
}

void Communicator::sendrecv(const void*, size_t, int, void*, size_t, int, DataType) {
  throw Error(ExitCode::kFailure, str_cat("the '", backend(), "' communicator has no point-to-point exchange"));
}

std::unique_ptr<Work> Communicator::sendrecv_async(const void* send, size_t send_count, int dest, void* recv,
                                                   size_t recv_count, int source, DataType type) {
  sendrecv(send, send_count, dest, recv, recv_count, source, type);
  return completed_work();
}

std::unique_ptr<Work> Communicator::reduce_scatter_inplace_async(void*, const std::vector<size_t>&, DataType,
                                                                ReduceOp) {
  throw Error(ExitCode::kFailure, str_cat("the '", backend(), "' communicator has no reduce-scatter"));
}

std::unique_ptr<Work> Communicator::allgather_inplace_async(void*, const std::vector<size_t>&, DataType) {
  throw Error(ExitCode::kFailure, str_cat("the '", backend(), "' communicator has no variable-count all-gather"));
}

std::vector<std::string> Communicator::allgather_strings(const std::string& value) {
  const auto lengths = allgather_value<int64_t>(static_cast<int64_t>(value.size()));
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  std::vector<uint8_t> send(static_cast<size_t>(longest), 0);
  std::copy(value.begin(), value.end(), send.begin());
  std::vector<uint8_t> recv(send.size() * static_cast<size_t>(size()));
  allgather(send.data(), recv.data(), send.size(), DataType::kU8);
  std::vector<std::string> all;
  for (int r = 0; r < size(); ++r) {
    const auto* begin = recv.data() + static_cast<size_t>(r) * send.size();
    all.emplace_back(begin, begin + lengths[static_cast<size_t>(r)]);
  }
  return all;
}

std::string Communicator::broadcast_string(const std::string& value, int root) {
  int64_t length = static_cast<int64_t>(value.size());
  broadcast(&length, 1, root);
  std::string out = value;
  out.resize(static_cast<size_t>(length));
  broadcast(out.data(), out.size(), DataType::kU8, root);
  return out;
}

}  // namespace mirrored::comm
