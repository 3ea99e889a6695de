#include "mpi_ring_reduce_scatter.h"

#include <algorithm>
#include <cstring>
#include <exception>

#include "mean.h"
#include "mirrored/comm/failure/mpi_check.h"
#include "mirrored/comm/mpi_types.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"

namespace mirrored::comm {
namespace {

class RingReduceScatter final : public Work {
 public:
  // In place: reduce `buffer`. Otherwise reduce a copy of `send` and write this rank's
  // piece to `buffer`.
  RingReduceScatter(MPI_Comm comm, int tag, CollectiveWatchdog* watchdog, int channel, bool in_place, const void* send,
                    void* buffer, RingPieces pieces, DataType type, ReduceOp op)
      : comm_(comm), tag_(tag), pieces_(std::move(pieces)), type_(type), op_(op), mpi_type_(mpi_datatype(type)),
        mpi_op_(mpi_reduce_op(type, op)), element_bytes_(datatype_size(type)),
        watch_(watchdog, CollectiveCall{"reduce-scatter", total(pieces_), type, channel}) {
    MIRRORED_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    MIRRORED_MPI_CHECK(MPI_Comm_size(comm_, &size_));
    MIRRORED_CHECK(pieces_.counts.size() == static_cast<size_t>(size_) && pieces_.offsets.size() == pieces_.counts.size(),
                   "ring reduce-scatter with ", pieces_.counts.size(), " pieces over ", size_, " ranks");
    if (!in_place) {
      copy_.resize(total(pieces_) * element_bytes_);
      if (!copy_.empty()) std::memcpy(copy_.data(), send, copy_.size());
      buffer_ = copy_.data();
      result_ = static_cast<char*>(buffer);
    } else {
      buffer_ = static_cast<char*>(buffer);
    }
    received_.resize(*std::max_element(pieces_.counts.begin(), pieces_.counts.end()) * element_bytes_);
    if (size_ > 1) post_round();
    else finish();
  }
  ~RingReduceScatter() override {
    if (!done_ && std::uncaught_exceptions() == 0) rank_warning("an MPI reduce-scatter was dropped while in flight");
  }

  bool test() override {
    while (!done_) {
      int complete = 0;
      MPI_Status statuses[2];
      MIRRORED_MPI_CHECK(request_error(MPI_Testall(2, requests_, &complete, statuses), statuses, 2));
      if (!complete) return false;
      end_round();
    }
    return true;
  }
  using Work::wait;
  // Spins: for a caller with a core of its own (see Work::wait()).
  void wait() override {
    while (!test()) {
    }
  }

 private:
  static size_t total(const RingPieces& pieces) {
    size_t sum = 0;
    for (const size_t count : pieces.counts) sum += count;
    return sum;
  }
  int piece_of_round(int shift) const { return ((rank_ - round_ - shift) % size_ + size_) % size_; }
  char* piece(int index) const { return buffer_ + pieces_.offsets[static_cast<size_t>(index)] * element_bytes_; }
  int count(int index) const { return mpi_count(pieces_.counts[static_cast<size_t>(index)]); }

  void post_round() {
    const int send = piece_of_round(1), receive = piece_of_round(2);
    const int right = (rank_ + 1) % size_, left = (rank_ - 1 + size_) % size_;
    MIRRORED_MPI_CHECK(MPI_Irecv(received_.data(), count(receive), mpi_type_, left, tag_, comm_, &requests_[0]));
    MIRRORED_MPI_CHECK(MPI_Isend(piece(send), count(send), mpi_type_, right, tag_, comm_, &requests_[1]));
  }
  void end_round() {
    const int receive = piece_of_round(2);
    // piece += received, with MPI's own operator (the bf16 sum included).
    if (count(receive) > 0)
      MIRRORED_MPI_CHECK(MPI_Reduce_local(received_.data(), piece(receive), count(receive), mpi_type_, mpi_op_));
    if (++round_ < size_ - 1) {
      post_round();
    } else {
      finish();
    }
  }
  void finish() {
    const size_t mine = pieces_.counts[static_cast<size_t>(rank_)];
    mean_from_sum(piece(rank_), mine, type_, op_, size_);
    if (result_ != nullptr && mine > 0) std::memcpy(result_, piece(rank_), mine * element_bytes_);
    done_ = true;
  }

  MPI_Comm comm_;
  int tag_;
  std::vector<char> copy_;  // the ring's buffer when the caller's send buffer is read-only
  char* buffer_ = nullptr;
  char* result_ = nullptr;  // where this rank's piece goes at the end, if not in place
  RingPieces pieces_;
  DataType type_;
  ReduceOp op_;
  MPI_Datatype mpi_type_;
  MPI_Op mpi_op_;
  size_t element_bytes_;
  CollectiveWatchdog::Scope watch_;  // in flight until destroyed
  int rank_ = 0, size_ = 1;
  int round_ = 0;
  std::vector<char> received_;
  MPI_Request requests_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  bool done_ = false;
};

}  // namespace

std::unique_ptr<Work> start_ring_reduce_scatter_inplace(MPI_Comm comm, int tag, CollectiveWatchdog* watchdog,
                                                        int channel, void* buffer, RingPieces pieces, DataType type,
                                                        ReduceOp op) {
  return std::make_unique<RingReduceScatter>(comm, tag, watchdog, channel, true, nullptr, buffer, std::move(pieces), type, op);
}

std::unique_ptr<Work> start_ring_reduce_scatter(MPI_Comm comm, int tag, CollectiveWatchdog* watchdog,
                                                int channel, const void* send, void* recv, RingPieces pieces,
                                                DataType type, ReduceOp op) {
  return std::make_unique<RingReduceScatter>(comm, tag, watchdog, channel, false, send, recv, std::move(pieces), type, op);
}

}  // namespace mirrored::comm
