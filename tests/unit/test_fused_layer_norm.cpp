// The layer norm with a residual add fused in (kernels::add_layer_norm_forward,
// layer_norm_backward_add) against the unfused calls, bit for bit, and the CPU backward's
// row groups against the one-row loop they replaced, worked out here: the fusion and the
// regrouping must not move a bit of the training step. Then LayerNorm::forward_sum and
// backward_add against central finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "gradcheck.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/transformer.h"

namespace mirrored {
namespace {

using testing::kGradTolerance;
using testing::numerical_grad;
using testing::random_tensor;
using testing::relative_error;
using testing::weighted_sum;

struct Shapes {
  int64_t rows, c;
};
// Row counts around the backward's groups of 8, widths with and without a tail of 16 lanes.
const Shapes kShapes[] = {{1, 10}, {7, 32}, {8, 128}, {9, 37}, {19, 128}, {33, 131}, {768, 128}};

void expect_same_bits(const Tensor& got, const Tensor& want, const char* what, Shapes s) {
  ASSERT_EQ(got.shape(), want.shape());
  const std::vector<float> g = got.to_vector(), w = want.to_vector();
  size_t differ = 0;
  for (size_t i = 0; i < g.size(); ++i) differ += std::memcmp(&g[i], &w[i], sizeof(float)) != 0;
  EXPECT_EQ(differ, 0u) << what << " differs in " << differ << " of " << g.size() << " values at rows " << s.rows
                        << ", c " << s.c;
}

TEST(FusedLayerNorm, AddThenNormaliseInOnePassGivesTheBitsOfTheTwoCalls) {
  Rng rng(11);
  for (const Shapes s : kShapes) {
    const Tensor a = random_tensor({s.rows, s.c}, rng, -3.0f, 3.0f), b = random_tensor({s.rows, s.c}, rng);
    const Tensor gamma = random_tensor({s.c}, rng, 0.5f, 1.5f), beta = random_tensor({s.c}, rng);
    Tensor sum({s.rows, s.c}), y({s.rows, s.c}), mean({s.rows}), rstd({s.rows});
    kernels::add_layer_norm_forward(a, b, gamma, beta, 1e-5f, sum, y, mean, rstd);
    Tensor sum2({s.rows, s.c}), y2({s.rows, s.c}), mean2({s.rows}), rstd2({s.rows});
    kernels::add(a, b, sum2);
    kernels::layer_norm_forward(sum2, gamma, beta, 1e-5f, y2, mean2, rstd2);
    expect_same_bits(sum, sum2, "sum", s);
    expect_same_bits(y, y2, "y", s);
    expect_same_bits(mean, mean2, "mean", s);
    expect_same_bits(rstd, rstd2, "rstd", s);
  }
}

// layer_norm_backward as it was written before the row groups: one row at a time, the two
// sums in one running float each, in channel order. The kernel must keep these bits.
void one_row_backward(const float* x, const float* dy, const float* gamma, const float* mean, const float* rstd,
                      int64_t rows, int64_t c, float* dx, float* dgamma, float* dbeta) {
  const float inv_c = 1.0f / static_cast<float>(c);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * c;
    const float* g = dy + r * c;
    const float m = mean[r], s = rstd[r];
    float sum_dg = 0.0f, sum_dg_xhat = 0.0f;
    for (int64_t j = 0; j < c; ++j) {
      const float xhat = (xr[j] - m) * s;
      const float dg = g[j] * gamma[j];
      sum_dg += dg;
      sum_dg_xhat += dg * xhat;
      dgamma[j] += g[j] * xhat;
      dbeta[j] += g[j];
    }
    const float mean_dg = sum_dg * inv_c, mean_dg_xhat = sum_dg_xhat * inv_c;
    for (int64_t j = 0; j < c; ++j) {
      const float xhat = (xr[j] - m) * s;
      dx[r * c + j] = s * (g[j] * gamma[j] - mean_dg - xhat * mean_dg_xhat);
    }
  }
}

TEST(FusedLayerNorm, BackwardInRowGroupsKeepsTheOneRowLoopsBits) {
  Rng rng(12);
  for (const Shapes s : kShapes) {
    const Tensor x = random_tensor({s.rows, s.c}, rng, 40.0f, 44.0f), dy = random_tensor({s.rows, s.c}, rng);
    const Tensor gamma = random_tensor({s.c}, rng, 0.5f, 1.5f), beta = random_tensor({s.c}, rng);
    const Tensor dgamma0 = random_tensor({s.c}, rng), dbeta0 = random_tensor({s.c}, rng);
    Tensor y({s.rows, s.c}), mean({s.rows}), rstd({s.rows});
    kernels::layer_norm_forward(x, gamma, beta, 1e-5f, y, mean, rstd);
    Tensor dx({s.rows, s.c}), dgamma = dgamma0.clone(), dbeta = dbeta0.clone(), workspace;
    kernels::layer_norm_backward(x, dy, gamma, mean, rstd, dx, dgamma, dbeta, workspace);
    Tensor want_dx({s.rows, s.c}), want_dgamma = dgamma0.clone(), want_dbeta = dbeta0.clone();
    one_row_backward(x.data<float>(), dy.data<float>(), gamma.data<float>(), mean.data<float>(), rstd.data<float>(),
                     s.rows, s.c, want_dx.data<float>(), want_dgamma.data<float>(), want_dbeta.data<float>());
    expect_same_bits(dx, want_dx, "dx", s);
    expect_same_bits(dgamma, want_dgamma, "dgamma", s);
    expect_same_bits(dbeta, want_dbeta, "dbeta", s);
  }
}

TEST(FusedLayerNorm, BackwardWithTheSkipPathsGradientGivesTheBitsOfBackwardThenAdd) {
  Rng rng(13);
  for (const Shapes s : kShapes) {
    const Tensor x = random_tensor({s.rows, s.c}, rng), dy = random_tensor({s.rows, s.c}, rng);
    const Tensor dresidual = random_tensor({s.rows, s.c}, rng);
    const Tensor gamma = random_tensor({s.c}, rng, 0.5f, 1.5f), beta = random_tensor({s.c}, rng);
    Tensor y({s.rows, s.c}), mean({s.rows}), rstd({s.rows});
    kernels::layer_norm_forward(x, gamma, beta, 1e-5f, y, mean, rstd);
    Tensor dx({s.rows, s.c}), dgamma({s.c}), dbeta({s.c}), workspace;
    kernels::layer_norm_backward_add(x, dy, gamma, mean, rstd, dresidual, dx, dgamma, dbeta, workspace);
    Tensor want_dx({s.rows, s.c}), want_dgamma({s.c}), want_dbeta({s.c});
    kernels::layer_norm_backward(x, dy, gamma, mean, rstd, want_dx, want_dgamma, want_dbeta, workspace);
    kernels::add(dresidual, want_dx, want_dx);
    expect_same_bits(dx, want_dx, "dx", s);
    expect_same_bits(dgamma, want_dgamma, "dgamma", s);
    expect_same_bits(dbeta, want_dbeta, "dbeta", s);
  }
}

TEST(FusedLayerNorm, RejectsMismatchedShapes) {
  Tensor a({4, 8}), b({4, 7}), gamma({8}), beta({8}), sum({4, 8}), y({4, 8}), mean({4}), rstd({4});
  EXPECT_THROW(kernels::add_layer_norm_forward(a, b, gamma, beta, 1e-5f, sum, y, mean, rstd), Error);
  Tensor dx({4, 8}), dgamma({8}), dbeta({8}), workspace, short_residual({3, 8});
  EXPECT_THROW(kernels::layer_norm_backward_add(a, a, gamma, mean, rstd, short_residual, dx, dgamma, dbeta, workspace),
               Error);
}

// L = sum(forward_sum(a, b) * up) + sum((a + b) * skip): the gradient with respect to a (and
// b) is backward_add(up, skip), the layer norm's input gradient plus the skip path's.
TEST(FusedLayerNorm, ForwardSumAndBackwardAddMatchFiniteDifferences) {
  nn::LayerNorm ln;
  nn::ParameterArena arena;
  ln.build({5, 12}, "ln.", 0, arena);
  arena.allocate(Device::cpu());
  ln.bind(arena);
  Rng rng(14);
  float* p = arena.flat_params().data<float>();
  for (int64_t i = 0; i < arena.flat_params().numel(); ++i) p[i] = rng.uniform(-1.0f, 1.0f);
  Tensor a = random_tensor({3, 5, 12}, rng), b = random_tensor({3, 5, 12}, rng);
  const Tensor up = random_tensor({3, 5, 12}, rng), skip = random_tensor({3, 5, 12}, rng);
  Tensor sum;
  const auto loss = [&] {
    const Tensor& y = ln.forward_sum(a, b, sum);
    return weighted_sum(y, up) + weighted_sum(sum, skip);
  };
  loss();
  arena.zero_grads();
  const Tensor da = ln.backward_add(up, skip).clone();
  EXPECT_LT(relative_error(da.to_vector(), numerical_grad(a, loss, 1e-2f)), kGradTolerance) << "a";
  EXPECT_LT(relative_error(da.to_vector(), numerical_grad(b, loss, 1e-2f)), kGradTolerance) << "b";
  for (size_t i = 0; i < arena.size(); ++i) {
    loss();
    arena.zero_grads();
    ln.backward_add(up, skip);
    const std::vector<float> analytic = arena.grad(i).to_vector();
    EXPECT_LT(relative_error(analytic, numerical_grad(arena.param(i), loss, 1e-2f)), kGradTolerance)
        << arena.info(i).name;
  }
}

}  // namespace
}  // namespace mirrored
