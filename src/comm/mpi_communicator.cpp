#include "mirrored/comm/mpi_communicator.h"

#include <array>
#include <climits>
#include <cstring>
#include <exception>

#include "mirrored/comm/failure/fault_tolerance.h"
#include "mirrored/comm/failure/mpi_check.h"
#include "mean.h"
#include "mpi_ring_reduce_scatter.h"
#include "mirrored/comm/mpi_types.h"

namespace mirrored::comm {

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return str_cat("MPI error ", code);
  return std::string(text, static_cast<size_t>(length));
}


MpiCommunicator::MpiCommunicator(MPI_Comm comm, CollectiveWatchdog* watchdog, const char* name)
    : watchdog_(watchdog), channel_(watchdog ? watchdog->add_channel(name) : 0) {
  MIRRORED_MPI_CHECK(MPI_Comm_dup(comm, &comm_));
  // Errors come back as codes so they reach MIRRORED_MPI_CHECK with their location.
  MIRRORED_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  track_communicator(comm_);  // revoked with the others when a peer fails
  MIRRORED_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  MIRRORED_MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

MpiCommunicator::~MpiCommunicator() {
  // While an error unwinds towards MPI_Abort, freeing (a synchronising call) could wait
  // for peers that never come; the abort reclaims everything anyway.
  untrack_communicator(comm_);
  if (std::uncaught_exceptions() > 0) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm_ != MPI_COMM_NULL && !finalized) MIRRORED_MPI_LOG(MPI_Comm_free(&comm_));
}

namespace {
// A nonblocking MPI collective: its requests (one, or a send and a receive), the arrays MPI
// reads until it completes, and the multiplication by 1/size() that turns a summed piece
// into a mean once it has (comm/mean.h).
class MpiWork final : public Work {
 public:
  struct Mean {
    void* buffer = nullptr;
    size_t count = 0;
    DataType type = DataType::kF32;
    ReduceOp op = ReduceOp::kSum;
    int ranks = 1;
  };
  MpiWork(CollectiveWatchdog* watchdog, const CollectiveCall& call, MPI_Request request, Mean mean,
          std::vector<int> counts = {}, std::vector<int> offsets = {})
      : watch_(watchdog, call), operation_(call.operation), requests_{request, MPI_REQUEST_NULL}, mean_(mean),
        counts_(std::move(counts)), offsets_(std::move(offsets)) {}
  MpiWork(CollectiveWatchdog* watchdog, const CollectiveCall& call, MPI_Request send, MPI_Request receive)
      : watch_(watchdog, call), operation_(call.operation), requests_{send, receive} {}
  ~MpiWork() override {
    if (!done_ && std::uncaught_exceptions() == 0)
      rank_warning(str_cat("an MPI ", operation_, " was dropped while in flight"));
  }
  bool test() override {
    if (done_) return true;
    int complete = 0;
    MIRRORED_MPI_CHECK(request_error(MPI_Testall(2, requests_.data(), &complete, statuses_.data())));
    if (complete) finish();
    return done_;
  }
  using Work::wait;
  void wait() override {
    if (done_) return;
    MIRRORED_MPI_CHECK(request_error(MPI_Waitall(2, requests_.data(), statuses_.data())));
    finish();
  }

 private:
  // MPI_ERR_IN_STATUS says only that a request failed: its own code (a failed peer's, say)
  // is in its status.
  int request_error(int result) const {
    if (result != MPI_ERR_IN_STATUS) return result;
    for (const MPI_Status& status : statuses_)
      if (status.MPI_ERROR != MPI_SUCCESS && status.MPI_ERROR != MPI_ERR_PENDING) return status.MPI_ERROR;
    return result;
  }

  void finish() {
    mean_from_sum(mean_.buffer, mean_.count, mean_.type, mean_.op, mean_.ranks);
    done_ = true;
  }

  CollectiveWatchdog::Scope watch_;  // in flight until destroyed
  const char* operation_;
  std::array<MPI_Request, 2> requests_;  // the second MPI_REQUEST_NULL but for a sendrecv
  std::array<MPI_Status, 2> statuses_{};
  Mean mean_;
  std::vector<int> counts_, offsets_;  // MPI may read them until completion
  bool done_ = false;
};

// Pieces for the ring, checked as MPI counts.
RingPieces ring_pieces(const std::vector<size_t>& counts, int ranks) {
  for (const size_t count : counts) (void)mpi_count(count);
  std::vector<size_t> offsets = piece_offsets(counts, ranks, "reduce-scatter");
  offsets.pop_back();  // the ring needs each piece's start only
  return RingPieces{counts, std::move(offsets)};
}

// MPI's int counts, and offsets as prefix sums; `equal` when every count is the same.
struct MpiCounts {
  std::vector<int> counts, offsets;
  size_t total = 0;
  bool equal = true;
};

MpiCounts mpi_counts(const std::vector<size_t>& counts, int ranks, const char* operation) {
  const std::vector<size_t> offsets = piece_offsets(counts, ranks, operation);
  MpiCounts out;
  out.total = offsets.back();
  for (size_t r = 0; r < counts.size(); ++r) {
    out.counts.push_back(mpi_count(counts[r]));
    out.offsets.push_back(mpi_count(offsets[r]));
    out.equal = out.equal && counts[r] == counts.front();
  }
  (void)mpi_count(out.total);
  return out;
}
}  // namespace

void MpiCommunicator::allreduce(void* buffer, size_t count, DataType type, ReduceOp op) {
  const MPI_Op mpi_op = mpi_reduce_op(type, op);
  CollectiveWatchdog::Scope watch(watchdog_, {"allreduce", count, type, channel_});
  MIRRORED_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buffer, mpi_count(count), mpi_datatype(type), mpi_op, comm_));
  mean_from_sum(buffer, count, type, op, size_);
}

std::unique_ptr<Work> MpiCommunicator::allreduce_async(void* buffer, size_t count, DataType type, ReduceOp op) {
  const MPI_Op mpi_op = mpi_reduce_op(type, op);
  MPI_Request request;
  MIRRORED_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buffer, mpi_count(count), mpi_datatype(type), mpi_op, comm_, &request));
  return std::make_unique<MpiWork>(watchdog_, CollectiveCall{"allreduce", count, type, channel_}, request,
                                   MpiWork::Mean{buffer, count, type, op, size_});
}

std::unique_ptr<Work> MpiCommunicator::reduce_scatter_async(const void* send, void* recv,
                                                            const std::vector<size_t>& counts, DataType type,
                                                            ReduceOp op) {
  return start_ring_reduce_scatter(comm_, next_ring_tag(), watchdog_, channel_, send, recv, ring_pieces(counts, size_), type, op);
}

std::unique_ptr<Work> MpiCommunicator::reduce_scatter_inplace_async(void* buffer, const std::vector<size_t>& counts,
                                                                   DataType type, ReduceOp op) {
  return start_ring_reduce_scatter_inplace(comm_, next_ring_tag(), watchdog_, channel_, buffer, ring_pieces(counts, size_), type,
                                           op);
}

int MpiCommunicator::next_ring_tag() {
  // Every rank starts its collectives in the same order, so the same count gives the same
  // tag; pieces of two reduce-scatters in flight at once never match each other's receives.
  constexpr int kTags = 1 << 14;  // MPI guarantees tags up to 32767
  return static_cast<int>(ring_collectives_++ % kTags);
}

std::unique_ptr<Work> MpiCommunicator::allgather_inplace_async(void* buffer, const std::vector<size_t>& counts,
                                                               DataType type) {
  MpiCounts c = mpi_counts(counts, size_, "all-gather");
  MPI_Request request;
  if (c.equal) {
    MIRRORED_MPI_CHECK(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buffer, c.counts.front(),
                                      mpi_datatype(type), comm_, &request));
  } else {
    MIRRORED_MPI_CHECK(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buffer, c.counts.data(), c.offsets.data(),
                                       mpi_datatype(type), comm_, &request));
  }
  return std::make_unique<MpiWork>(watchdog_, CollectiveCall{"all-gather", c.total, type, channel_}, request,
                                   MpiWork::Mean{},
                                   std::move(c.counts), std::move(c.offsets));
}

void MpiCommunicator::broadcast(void* buffer, size_t count, DataType type, int root) {
  CollectiveWatchdog::Scope watch(watchdog_, {"broadcast", count, type, channel_});
  MIRRORED_MPI_CHECK(MPI_Bcast(buffer, mpi_count(count), mpi_datatype(type), root, comm_));
}

void MpiCommunicator::sendrecv(const void* send, size_t send_count, int dest, void* recv, size_t recv_count,
                               int source, DataType type) {
  MIRRORED_CHECK(dest >= 0 && dest < size_ && source >= 0 && source < size_, "sendrecv to rank ", dest,
                 " from rank ", source, " in a world of ", size_);
  // Recorded without a count: counts differ between ranks (uneven shards), and the record's
  // fingerprint must be the same on every rank of one matching call.
  CollectiveWatchdog::Scope watch(watchdog_, {"sendrecv", 0, type, channel_});
  // A tag of the ring's sequence: every rank starts its exchanges in the same order.
  const int tag = next_ring_tag();
  MIRRORED_MPI_CHECK(MPI_Sendrecv(send, mpi_count(send_count), mpi_datatype(type), dest, tag, recv,
                                  mpi_count(recv_count), mpi_datatype(type), source, tag, comm_, MPI_STATUS_IGNORE));
}

std::unique_ptr<Work> MpiCommunicator::sendrecv_async(const void* send, size_t send_count, int dest, void* recv,
                                                      size_t recv_count, int source, DataType type) {
  MIRRORED_CHECK(dest >= 0 && dest < size_ && source >= 0 && source < size_, "sendrecv to rank ", dest,
                 " from rank ", source, " in a world of ", size_);
  const int tag = next_ring_tag();  // as sendrecv's
  MPI_Request receive = MPI_REQUEST_NULL, sent = MPI_REQUEST_NULL;
  MIRRORED_MPI_CHECK(MPI_Irecv(recv, mpi_count(recv_count), mpi_datatype(type), source, tag, comm_, &receive));
  MIRRORED_MPI_CHECK(MPI_Isend(send, mpi_count(send_count), mpi_datatype(type), dest, tag, comm_, &sent));
  return std::make_unique<MpiWork>(watchdog_, CollectiveCall{"sendrecv", 0, type, channel_}, sent, receive);
}

void MpiCommunicator::allgather(const void* send, void* recv, size_t count, DataType type) {
  CollectiveWatchdog::Scope watch(watchdog_, {"allgather", count, type, channel_});
  MIRRORED_MPI_CHECK(MPI_Allgather(send, mpi_count(count), mpi_datatype(type), recv, mpi_count(count),
                                   mpi_datatype(type), comm_));
}

void MpiCommunicator::barrier() {
  CollectiveWatchdog::Scope watch(watchdog_, {"barrier", 0, DataType::kU8, channel_});
  MIRRORED_MPI_CHECK(MPI_Barrier(comm_));
}

}  // namespace mirrored::comm
