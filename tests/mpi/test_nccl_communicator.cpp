// NCCL between real ranks, one GPU each: rank-filled buffers with exact expected answers,
// on device buffers and on host buffers (staged), and the gradient reducer on device
// gradients. Skipped on every rank together (no GPU, or fewer GPUs than ranks on a host),
// so no rank waits in a communicator the others never create.
//
// MIRRORED_TEST_SHARED_GPU=1 (launch/gpu_selftest.sh on a machine with one GPU): the ranks
// of a host all take device 0. NCCL refuses two ranks of one communicator on one GPU of one
// host ("Duplicate GPU detected", checked by host id and PCI bus id), so each rank is given
// a host id of its own (NCCL_HOSTID) and NCCL connects them as hosts apart, through its
// socket transport over loopback (NCCL_SOCKET_IFNAME=lo, NCCL_NET=Socket unless set). What
// the communicator does between ranks (bootstrap, every collective, asynchronous errors,
// the timeout) is then exercised on one GPU; NCCL's shared-memory, P2P and NVLink paths,
// which ranks on one host with GPUs of their own use, are not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "mirrored/core/cuda_memory.h"
#include "mirrored/core/process.h"
#include "mirrored/core/rng.h"
#include "mirrored/core/tensor.h"
#include "mirrored/runtime/device_choice.h"
#include "mpi_env.h"

#ifdef MIRRORED_WITH_CUDA
#include <cuda_runtime.h>

#include "mirrored/comm/nccl_communicator.h"
#include "mirrored/distribute/distributed_model.h"
#include "mirrored/distribute/gradient_reducer.h"
#include "mirrored/kernels/device_context.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/builders.h"
#include "mirrored/nn/loss.h"
#endif

using namespace mirrored;

namespace {

// The runtime's rule (runtime/device_choice.h): what this rank sees, not its local rank
// alone, so a rank narrowed to one GPU by Slurm takes device 0.
runtime::DevicePick my_pick(int visible) {
  const auto& cluster = test_runtime().cluster();
  return runtime::pick_cuda_device(runtime::DeviceQuery::from(
      cluster.local_rank(), cluster.local_size(), visible, [](const char* name) { return std::getenv(name); }));
}

bool shared_gpu() {
  const char* value = std::getenv("MIRRORED_TEST_SHARED_GPU");
  return value != nullptr && std::string(value) == "1";
}

// Before this process's first NCCL call (NCCL reads its host id once).
void pretend_hosts_apart() {
  const std::string id = local_hostname() + "-rank" + std::to_string(test_runtime().world().rank());
  setenv("NCCL_HOSTID", id.c_str(), 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 0);
  setenv("NCCL_NET", "Socket", 0);
}

// Empty when every rank has a GPU of its own (or shares device 0 as asked); otherwise the
// reason (the same on every rank).
std::string why_not_runnable() {
  auto& world = test_runtime().world();
  std::string reason;
  const int visible = cuda_device_count(&reason);
  if (shared_gpu()) {
    const int without = world.allreduce_value<int32_t>(visible == 0 ? 1 : 0, comm::ReduceOp::kMax);
    if (without) return "no CUDA device: " + (reason.empty() ? std::string("on some rank") : reason);
    pretend_hosts_apart();
    return {};
  }
  const int mine = visible == 0 ? 0 : (my_pick(visible).ok() ? 1 : 2);
  const int worst = world.allreduce_value<int32_t>(mine == 1 ? 0 : (mine == 0 ? 2 : 1), comm::ReduceOp::kMax);
  if (worst == 2) return "no CUDA device: " + (reason.empty() ? std::string("on some rank") : reason);
  if (worst == 1) return "needs one GPU per rank: more ranks than GPUs on a host";
#ifdef MIRRORED_WITH_CUDA
  // Ranks that each see one GPU may still see the same one (plain mpirun on a one-GPU host).
  char bus[32] = {};
  cudaDeviceGetPCIBusId(bus, sizeof(bus), my_pick(visible).index);
  const auto gpus = world.allgather_strings(local_hostname() + "|" + bus);
  if (std::set<std::string>(gpus.begin(), gpus.end()).size() != gpus.size())
    return "needs one GPU per rank: ranks on a host share a GPU";
#endif
  return {};
}

// The fixture of every test here: skips on every rank together unless each has a GPU of its
// own. launch/gpu_selftest.sh selects GPU tests by fixture (tests/tools/gpu_tests.py).
class GpuPerRankTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = why_not_runnable();
    if (!why.empty()) GTEST_SKIP() << why;
  }
};
class Nccl : public GpuPerRankTest {};

#ifdef MIRRORED_WITH_CUDA
int my_device() { return shared_gpu() ? 0 : my_pick(cuda_device_count(nullptr)).index; }

std::unique_ptr<comm::NcclCommunicator> make_nccl() {
  return std::make_unique<comm::NcclCommunicator>(test_runtime().world(), my_device(), /*timeout_seconds=*/60.0);
}

Tensor on_gpu(const std::vector<float>& values) {
  Tensor host = Tensor::from(values, {static_cast<int64_t>(values.size())});
  Tensor device({host.numel()}, DType::kF32, Device::cuda(my_device()));
  kernels::copy(host, device);
  return device;
}
#endif

TEST_F(Nccl, AllreduceSumAndMeanOnDeviceBuffers) {
#ifdef MIRRORED_WITH_CUDA
  const kernels::DeviceContext gpu_context(my_device());  // the Runtime here is CPU-only
  auto nccl = make_nccl();
  const int n = nccl->size(), r = nccl->rank();
  EXPECT_EQ(n, test_runtime().world_size());
  EXPECT_EQ(nccl->backend(), "nccl");
  const size_t count = 1000003;  // not a multiple of anything NCCL chunks by
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = static_cast<float>((r + 1) * static_cast<int>(i % 7 + 1));
  Tensor sum = on_gpu(values), mean = on_gpu(values);
  nccl->allreduce(sum.data<float>(), count, comm::ReduceOp::kSum);
  nccl->allreduce(mean.data<float>(), count, comm::ReduceOp::kMean);
  const float ranks = static_cast<float>(n * (n + 1) / 2);
  const auto got_sum = sum.to_vector(), got_mean = mean.to_vector();
  int64_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    const float expected = ranks * static_cast<float>(i % 7 + 1);
    wrong += got_sum[i] != expected;
    wrong += got_mean[i] != expected / static_cast<float>(n);
  }
  EXPECT_EQ(wrong, 0);
#endif
}

TEST_F(Nccl, BroadcastAllgatherAndBarrierOnHostAndDeviceBuffers) {
#ifdef MIRRORED_WITH_CUDA
  const kernels::DeviceContext gpu_context(my_device());  // the Runtime here is CPU-only
  auto nccl = make_nccl();
  const int n = nccl->size(), r = nccl->rank();
  // Host buffers are staged through the device.
  int64_t host_value = r == n - 1 ? 4242 : -1;
  nccl->broadcast(&host_value, 1, n - 1);
  EXPECT_EQ(host_value, 4242);
  const auto ranks = nccl->allgather_value<int32_t>(r * 10);
  for (int i = 0; i < n; ++i) EXPECT_EQ(ranks[static_cast<size_t>(i)], i * 10);
  EXPECT_EQ(nccl->broadcast_string(r == 0 ? "from the chief" : "", 0), "from the chief");
  // Device buffers.
  Tensor params = on_gpu(std::vector<float>(257, static_cast<float>(r + 1)));
  nccl->broadcast(params.data<float>(), 257, 0);
  for (float v : params.to_vector()) ASSERT_EQ(v, 1.0f);
  Tensor mine = on_gpu({static_cast<float>(r), static_cast<float>(-r)});
  Tensor all({2 * static_cast<int64_t>(n)}, DType::kF32, Device::cuda(my_device()));
  nccl->allgather(mine.data<float>(), all.data<float>(), 2, comm::DataType::kF32);
  const auto gathered = all.to_vector();
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(gathered[static_cast<size_t>(2 * i)], static_cast<float>(i));
    EXPECT_EQ(gathered[static_cast<size_t>(2 * i + 1)], static_cast<float>(-i));
  }
  nccl->barrier();
#endif
}

// The sharded-state collectives: equal pieces (ncclReduceScatter, ncclAllGather) and pieces
// that do not divide (grouped ncclReduce / ncclBroadcast), rank-filled, exact.
TEST_F(Nccl, ReduceScatterAndAllgatherInPlaceEvenAndUneven) {
#ifdef MIRRORED_WITH_CUDA
  const kernels::DeviceContext gpu_context(my_device());
  auto nccl = make_nccl();
  const int n = nccl->size(), r = nccl->rank();
  std::vector<size_t> uneven;
  for (int i = 0; i < n; ++i) uneven.push_back(static_cast<size_t>(2 * i + 3));
  for (const auto& counts : {uneven, std::vector<size_t>(static_cast<size_t>(n), 1001)}) {
    size_t total = 0, offset = 0;
    for (int i = 0; i < n; ++i) {
      if (i < r) offset += counts[static_cast<size_t>(i)];
      total += counts[static_cast<size_t>(i)];
    }
    const size_t mine = counts[static_cast<size_t>(r)];
    std::vector<float> values(total);
    for (size_t i = 0; i < total; ++i) values[i] = static_cast<float>((r + 1) * static_cast<int>(i % 7 + 1));
    Tensor send = on_gpu(values), recv = on_gpu(std::vector<float>(mine, -1.0f));
    nccl->reduce_scatter(send.data<float>(), recv.data<float>(), counts, comm::DataType::kF32, comm::ReduceOp::kMean);
    const auto got = recv.to_vector();
    const float ranks = static_cast<float>(n * (n + 1) / 2);
    for (size_t j = 0; j < mine; ++j)
      ASSERT_EQ(got[j], ranks * static_cast<float>((offset + j) % 7 + 1) / static_cast<float>(n)) << "element " << j;
    Tensor in_place = on_gpu(values);
    nccl->reduce_scatter_inplace_async(in_place.data<float>(), counts, comm::DataType::kF32, comm::ReduceOp::kSum)
        ->wait();
    const auto reduced = in_place.to_vector();
    for (size_t j = 0; j < mine; ++j)
      ASSERT_EQ(reduced[offset + j], ranks * static_cast<float>((offset + j) % 7 + 1)) << "in place, element " << j;
    std::vector<float> pieces(total, -1.0f);
    for (size_t j = 0; j < mine; ++j) pieces[offset + j] = static_cast<float>(r * 100) + static_cast<float>(j);
    Tensor gathered = on_gpu(pieces);
    nccl->allgather_inplace(gathered.data<float>(), counts, comm::DataType::kF32);
    const auto all = gathered.to_vector();
    size_t at = 0;
    for (int i = 0; i < n; ++i)
      for (size_t j = 0; j < counts[static_cast<size_t>(i)]; ++j, ++at)
        ASSERT_EQ(all[at], static_cast<float>(i * 100) + static_cast<float>(j)) << "rank " << i << " element " << j;
  }
#endif
}

TEST_F(Nccl, MeanIsTheSumDividedOnce) {
#ifdef MIRRORED_WITH_CUDA
  const kernels::DeviceContext gpu_context(my_device());  // the Runtime here is CPU-only
  // Integer inputs: their sum is exact in float, so the contract's mean (the sum, then one
  // multiplication by 1/n, as the MPI backends do) is known to the bit. Scaling each input
  // by 1/n first (ncclAvg) rounds n times and misses it where n is not a power of 2.
  auto nccl = make_nccl();
  const int n = nccl->size(), r = nccl->rank();
  std::vector<float> values(4096);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>((r + 1) * static_cast<int>(i % 13 + 1) + static_cast<int>(i % 5));
  Tensor mean = on_gpu(values);
  nccl->allreduce(mean.data<float>(), values.size(), comm::ReduceOp::kMean);
  const auto got = mean.to_vector();
  int64_t wrong = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const int sum = n * (n + 1) / 2 * static_cast<int>(i % 13 + 1) + n * static_cast<int>(i % 5);
    wrong += got[i] != static_cast<float>(sum) * (1.0f / static_cast<float>(n));
  }
  EXPECT_EQ(wrong, 0);
#endif
}

TEST_F(Nccl, AsyncHandlesCompleteInOrderAndWaitHonoursItsDeadline) {
#ifdef MIRRORED_WITH_CUDA
  const kernels::DeviceContext gpu_context(my_device());  // the Runtime here is CPU-only
  auto nccl = make_nccl();
  const int n = nccl->size(), r = nccl->rank();
  std::vector<Tensor> buffers;
  std::vector<std::unique_ptr<comm::Work>> works;
  for (int k = 0; k < 8; ++k) {
    buffers.push_back(on_gpu(std::vector<float>(100000, static_cast<float>(r + k))));
    works.push_back(nccl->allreduce_async(buffers.back().data<float>(), 100000, comm::DataType::kF32,
                                          comm::ReduceOp::kSum));
  }
  // A deadline in the past returns at once, complete or not; a later wait completes it.
  (void)works.back()->wait(comm::Work::Clock::now());
  for (auto& work : works) work->wait();
  for (int k = 0; k < 8; ++k) {
    EXPECT_TRUE(works[static_cast<size_t>(k)]->test());
    const float expected = static_cast<float>(n * (n - 1) / 2 + n * k);
    for (float v : buffers[static_cast<size_t>(k)].to_vector()) ASSERT_EQ(v, expected) << "buffer " << k;
  }
#endif
}

#ifdef MIRRORED_WITH_CUDA
// Every gradient of rank r set to (r + 1) * (i % 5 + 1): the mean is exact in float and bf16.
std::vector<float> reduced_gradients(distribute::ReducerOptions options) {
  auto nccl = make_nccl();
  nn::Model model = nn::mlp({{64, 32}, 10});
  model.build({40}, Device::cuda(my_device()));
  auto& arena = model.parameters();
  const int r = nccl->rank();
  std::vector<float> grads(static_cast<size_t>(arena.numel()));
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = static_cast<float>((r + 1) * static_cast<int>(i % 5 + 1));
  distribute::GradientReducer reducer(arena, *nccl, options);
  EXPECT_NE(reducer.overlap(), distribute::Overlap::kThread) << "no communication thread on a GPU";
  reducer.begin_step(1);
  kernels::copy(Tensor::from(grads, arena.flat_grads().shape()), arena.flat_grads());
  for (size_t layer = model.num_layers(); layer-- > 0;) reducer.on_layer_ready(layer);
  reducer.finish();
  return arena.flat_grads().to_vector();
}
#endif

TEST_F(Nccl, GradientReducerAveragesDeviceGradientsInEveryMode) {
#ifdef MIRRORED_WITH_CUDA
  const kernels::DeviceContext gpu_context(my_device());  // the Runtime here is CPU-only
  const int n = test_runtime().world_size();
  for (auto overlap : {distribute::Overlap::kAuto, distribute::Overlap::kThread, distribute::Overlap::kOff}) {
    for (auto compression : {distribute::GradCompression::kNone, distribute::GradCompression::kBf16}) {
      distribute::ReducerOptions options;
      options.overlap = overlap;
      options.compression = compression;
      options.caps.bucket_bytes = 4096;  // several buckets
      options.caps.first_bucket_bytes = 1024;
      const auto got = reduced_gradients(options);
      int64_t wrong = 0;
      for (size_t i = 0; i < got.size(); ++i)
        wrong += got[i] != static_cast<float>(n + 1) / 2.0f * static_cast<float>(i % 5 + 1);
      EXPECT_EQ(wrong, 0) << "overlap " << distribute::overlap_name(overlap) << ", bf16 "
                          << (compression == distribute::GradCompression::kBf16);
    }
  }
#endif
}

TEST_F(Nccl, SyncBatchNormAndOverlappedBucketsShareOneCommunicatorFromOneThread) {
  // Sync batch norm sums statistics on the device communicator while backward fills
  // gradient buckets; both go through the one NCCL communicator from this thread, in
  // program order, so no rank can wait in one collective while a peer waits in another.
#ifdef MIRRORED_WITH_CUDA
  const kernels::DeviceContext gpu_context(my_device());  // the Runtime here is CPU-only
  auto nccl = make_nccl();
  const int n = nccl->size(), r = nccl->rank();
  const Device gpu = Device::cuda(my_device());
  nn::CnnSpec spec;
  spec.channels = {4, 8};
  spec.kernel = 3;
  spec.padding = 1;
  spec.hidden = {16};
  spec.batchnorm = true;
  spec.sync_batchnorm = true;
  auto module = std::make_unique<nn::Model>(nn::cnn(spec));
  module->build({1, 28, 28}, gpu);
  module->initialize(3);  // the same on every rank
  distribute::ReducerOptions options;
  options.caps = {1024, 4096};  // several buckets
  distribute::DistributedModel model(std::move(module), *nccl, *nccl, options);
  // Buckets go out inline as backward fills them; a world of one has nothing to send, and
  // its reducer is off (one GPU: this test runs only at np = 1).
  EXPECT_EQ(model.reducer().overlap(), n > 1 ? distribute::Overlap::kInline : distribute::Overlap::kOff);
  Rng rng(11, static_cast<uint64_t>(r));
  Tensor x_host({8, 1, 28, 28}), y_host({8}, DType::kI32);
  for (int64_t i = 0; i < x_host.numel(); ++i) x_host.data<float>()[i] = rng.uniform(0.0f, 1.0f);
  for (int64_t i = 0; i < 8; ++i) y_host.data<int32_t>()[i] = static_cast<int32_t>(rng.below(10));
  Tensor x({8, 1, 28, 28}, DType::kF32, gpu), y({8}, DType::kI32, gpu);
  kernels::copy(x_host, x);
  kernels::copy(y_host, y);
  nn::CrossEntropyLoss loss;
  for (int step = 0; step < 3; ++step) {
    model.zero_grad();
    loss.forward(model.forward(x, nn::Mode::kTrain), y);
    model.backward(loss.grad());
    model.synchronize_gradients();
  }
  // Averaged gradients are the same on every rank, to the bit.
  const auto grads = model.parameters().flat_grads().to_vector();
  std::vector<float> all(grads.size() * static_cast<size_t>(n));
  test_runtime().world().allgather(grads.data(), all.data(), grads.size(), comm::DataType::kF32);
  for (int src = 1; src < n; ++src)
    EXPECT_TRUE(std::equal(grads.begin(), grads.end(), all.begin() + static_cast<int64_t>(src * grads.size())))
        << "rank " << src << " holds other gradients";
#endif
}

}  // namespace
