// Sync batch norm across real ranks: each rank normalises its slice of a global batch
// with statistics summed over all ranks, and must reproduce, slice for slice, a plain
// batch norm over the whole batch (outputs, input gradients, running statistics, and
// parameter gradients once summed over ranks).
#include <gtest/gtest.h>

#include <cmath>

#include "mirrored/comm/communicator.h"
#include "mirrored/distribute/distributed_model.h"
#include "mirrored/nn/conv.h"
#include "mpi_env.h"

using namespace mirrored;

namespace {

Tensor random_tensor(const Shape& shape, Rng& rng, float lo, float hi) {
  Tensor t(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = rng.uniform(lo, hi);
  return t;
}

struct Bn {
  nn::ParameterArena arena;
  nn::RunContext context;
  nn::BatchNorm2d layer;
  explicit Bn(bool sync) : layer(sync) {
    layer.build({3, 4, 4}, "0.batchnorm.", 0, arena);
    arena.allocate(Device::cpu());
    layer.bind(arena);
    layer.attach(&context);
    Rng rng(1);
    layer.initialize(rng);
    arena.param(0).data<float>()[1] = 1.5f;  // gamma away from 1
  }
};

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(static_cast<double>(a[i]) - b[i]));
  return a.size() == b.size() ? d : 1e9;
}

}  // namespace

TEST(SyncBatchNorm, SlicesOfTheGlobalBatchMatchOneBatchNormOverAllOfIt) {
  comm::Communicator& world = test_runtime().world();
  const int rank = world.rank(), size = world.size();
  const int64_t local = 3, global = local * size, sample = 3 * 4 * 4;
  Rng rng(77);  // the same global data on every rank
  const Tensor x = random_tensor({global, 3, 4, 4}, rng, 1.0f, 3.0f);
  const Tensor up = random_tensor({global, 3, 4, 4}, rng, -1.0f, 1.0f);

  Bn whole(false);
  const Tensor y_ref = whole.layer.forward(x, nn::Mode::kTrain).clone();
  const Tensor dx_ref = whole.layer.backward(up, true).clone();

  Bn mine(true);
  distribute::CommunicatorReducer reducer(world);
  mine.context.reducer = &reducer;
  mine.context.first_sample = rank * local;
  const Tensor x_mine = x.view(rank * local * sample, {local, 3, 4, 4});
  const Tensor up_mine = up.view(rank * local * sample, {local, 3, 4, 4});
  const Tensor y = mine.layer.forward(x_mine, nn::Mode::kTrain).clone();
  const Tensor dx = mine.layer.backward(up_mine, true).clone();

  EXPECT_LT(max_diff(y.to_vector(), y_ref.view(rank * local * sample, {local, 3, 4, 4}).to_vector()), 1e-5);
  EXPECT_LT(max_diff(dx.to_vector(), dx_ref.view(rank * local * sample, {local, 3, 4, 4}).to_vector()), 1e-5);
  EXPECT_LT(max_diff(mine.arena.flat_buffers().to_vector(), whole.arena.flat_buffers().to_vector()), 1e-6);
  Tensor grads = mine.arena.flat_grads();
  world.allreduce(grads.data<float>(), static_cast<size_t>(grads.numel()), comm::ReduceOp::kSum);
  EXPECT_LT(max_diff(grads.to_vector(), whole.arena.flat_grads().to_vector()), 1e-4);

  // Without sync the same slices normalise with their own statistics: visibly different.
  Bn unsynced(false);
  const Tensor y_local = unsynced.layer.forward(x_mine, nn::Mode::kTrain).clone();
  if (size > 1) EXPECT_GT(max_diff(y_local.to_vector(), y.to_vector()), 1e-3);
}
