// The fused causal attention on the CPU against a reference worked out here in double and
// against the materialised kernels (attention_forward / attention_backward), at contexts
// that are below, at and across its 64-key blocks; its bits at 1 and 2 threads; and the
// attention layer (which runs it) with its dropout on and off.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "attention_reference.h"
#include "gradcheck.h"
#include "mirrored/core/error.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/transformer.h"

namespace mirrored {
namespace {

using testing::random_tensor;
using testing::relative_error;

using testing::attention_reference;


std::vector<float> as_floats(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

struct Fused {
  Tensor out, lse, dqkv;
};
Fused run_fused(const Tensor& qkv, const Tensor& dout, int64_t heads) {
  const int64_t B = qkv.dim(0), T = qkv.dim(1), C = qkv.dim(2) / 3;
  Fused f{Tensor({B, T, C}), Tensor({B, heads, T}), Tensor(qkv.shape())};
  Tensor workspace;
  kernels::fused_attention_forward(qkv, heads, f.out, f.lse);
  kernels::fused_attention_backward(qkv, f.out, f.lse, dout, heads, f.dqkv, workspace);
  return f;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() &&
         std::memcmp(a.data<float>(), b.data<float>(), static_cast<size_t>(a.numel()) * sizeof(float)) == 0;
}

// (context, heads): one key, a partial block, one block, across blocks, sixteen blocks.
class FusedAttention : public ::testing::TestWithParam<std::tuple<int64_t, int64_t>> {};

TEST_P(FusedAttention, MatchesDoubleReferenceAndMaterialisedKernels) {
  const auto [T, H] = GetParam();
  const int64_t B = 2, C = 32 * H;  // head size 32, as in the gpt recipe
  Rng rng(static_cast<uint64_t>(100 + T * 8 + H));
  const Tensor qkv = random_tensor({B, T, 3 * C}, rng, -2.0f, 2.0f), dout = random_tensor({B, T, C}, rng);
  const Fused f = run_fused(qkv, dout, H);
  const auto ref = attention_reference(qkv, dout, H);
  // float32 against double on O(1) values: scores of up to ~20, sums over up to 1024 keys.
  constexpr double kTolerance = 2e-5;
  EXPECT_LT(relative_error(f.out.to_vector(), as_floats(ref.out)), kTolerance);
  EXPECT_LT(relative_error(f.lse.to_vector(), as_floats(ref.lse)), kTolerance);
  EXPECT_LT(relative_error(f.dqkv.to_vector(), as_floats(ref.dqkv)), kTolerance);

  Tensor out({B, T, C}), probs({B, H, T, T}), dqkv(qkv.shape()), workspace;
  kernels::attention_forward(qkv, H, out, probs);
  kernels::attention_backward(qkv, probs, dout, H, dqkv, workspace);
  EXPECT_LT(relative_error(f.out.to_vector(), out.to_vector()), kTolerance);
  EXPECT_LT(relative_error(f.dqkv.to_vector(), dqkv.to_vector()), kTolerance);
}

TEST_P(FusedAttention, SameBitsAtOneAndTwoThreads) {
  const auto [T, H] = GetParam();
  const int64_t B = 3, C = 32 * H;
  Rng rng(static_cast<uint64_t>(7 + T));
  const Tensor qkv = random_tensor({B, T, 3 * C}, rng, -2.0f, 2.0f), dout = random_tensor({B, T, C}, rng);
  const int threads = kernels::cpu_threads();
  kernels::set_cpu_threads(1);
  const Fused one = run_fused(qkv, dout, H);
  kernels::set_cpu_threads(2);
  const Fused two = run_fused(qkv, dout, H);
  kernels::set_cpu_threads(threads);
  EXPECT_TRUE(same_bits(one.out, two.out));
  EXPECT_TRUE(same_bits(one.lse, two.lse));
  EXPECT_TRUE(same_bits(one.dqkv, two.dqkv));
}

INSTANTIATE_TEST_SUITE_P(Contexts, FusedAttention,
                         ::testing::Combine(::testing::Values(1, 7, 64, 257, 1024), ::testing::Values(1, 4)),
                         [](const auto& info) {
                           return "T" + std::to_string(std::get<0>(info.param)) + "_H" +
                                  std::to_string(std::get<1>(info.param));
                         });

// The CPU kernel reads q, k, v and dO where they lie when the head size is a multiple of 32
// and T of 4, and from padded copies otherwise: the same bits either way. Causal rows see
// only earlier keys, so the first 64 rows at T = 64 (read in place) must match the first 64
// at T = 65 (copied), forward and backward, when the extra row's dO is 0 (it then adds +0
// to every dK and dV sum).
TEST(FusedAttentionShapes, RowsReadInPlaceAndFromCopiesGiveTheSameBits) {
  const int64_t B = 2, H = 4, C = 32 * H, T = 64, T1 = T + 1;
  Rng rng(5);
  const Tensor qkv1 = random_tensor({B, T1, 3 * C}, rng, -2.0f, 2.0f), dout_rand = random_tensor({B, T1, C}, rng);
  Tensor qkv({B, T, 3 * C}), dout({B, T, C}), dout1({B, T1, C});
  std::memset(dout1.data<float>(), 0, static_cast<size_t>(dout1.numel()) * sizeof(float));
  for (int64_t b = 0; b < B; ++b) {
    std::memcpy(qkv.data<float>() + b * T * 3 * C, qkv1.data<float>() + b * T1 * 3 * C,
                static_cast<size_t>(T * 3 * C) * sizeof(float));
    std::memcpy(dout.data<float>() + b * T * C, dout_rand.data<float>() + b * T1 * C,
                static_cast<size_t>(T * C) * sizeof(float));
    std::memcpy(dout1.data<float>() + b * T1 * C, dout_rand.data<float>() + b * T1 * C,
                static_cast<size_t>(T * C) * sizeof(float));
  }
  const Fused in_place = run_fused(qkv, dout, H), copied = run_fused(qkv1, dout1, H);
  auto rows_equal = [&](const Tensor& a, const Tensor& a1, int64_t width) {
    for (int64_t b = 0; b < B; ++b)
      if (std::memcmp(a.data<float>() + b * T * width, a1.data<float>() + b * T1 * width,
                      static_cast<size_t>(T * width) * sizeof(float)) != 0)
        return false;
    return true;
  };
  EXPECT_TRUE(rows_equal(in_place.out, copied.out, C));
  EXPECT_TRUE(rows_equal(in_place.dqkv, copied.dqkv, 3 * C));
  for (int64_t n = 0; n < B * H; ++n)  // lse is [B, H, T]
    EXPECT_EQ(std::memcmp(in_place.lse.data<float>() + n * T, copied.lse.data<float>() + n * T1,
                          static_cast<size_t>(T) * sizeof(float)),
              0)
        << n;
}

// A head size that is not a multiple of the kernel's 32-channel step, and large scores: the
// running maximum changes from block to block and the padding must stay out of the sums.
TEST(FusedAttentionShapes, OddHeadSizeAndLargeScores) {
  const int64_t B = 1, T = 150, H = 3, C = 3 * 5;
  Rng rng(11);
  const Tensor qkv = random_tensor({B, T, 3 * C}, rng, -6.0f, 6.0f), dout = random_tensor({B, T, C}, rng);
  const Fused f = run_fused(qkv, dout, H);
  const auto ref = attention_reference(qkv, dout, H);
  EXPECT_LT(relative_error(f.out.to_vector(), as_floats(ref.out)), 5e-5);
  EXPECT_LT(relative_error(f.dqkv.to_vector(), as_floats(ref.dqkv)), 5e-5);
}

// Head size 128, the largest the fused attention supports on any device: the GPU kernel's
// widest register layout, the CPU's four 32-channel steps.
TEST(FusedAttentionShapes, HeadSize128MatchesTheReference) {
  const int64_t B = 2, T = 90, H = 2, C = H * kernels::kMaxAttentionHeadSize;
  Rng rng(12);
  const Tensor qkv = random_tensor({B, T, 3 * C}, rng, -1.0f, 1.0f), dout = random_tensor({B, T, C}, rng);
  const Fused f = run_fused(qkv, dout, H);
  const auto ref = attention_reference(qkv, dout, H);
  EXPECT_LT(relative_error(f.out.to_vector(), as_floats(ref.out)), 2e-5);
  EXPECT_LT(relative_error(f.lse.to_vector(), as_floats(ref.lse)), 2e-5);
  EXPECT_LT(relative_error(f.dqkv.to_vector(), as_floats(ref.dqkv)), 2e-5);
}

// Above it the CPU refuses as the GPU does (a model that trains on one device trains on the
// other), naming the head size, forward and backward.
TEST(FusedAttentionShapes, RefusesHeadSizesAbove128) {
  const int64_t B = 1, T = 4, H = 2, C = H * (kernels::kMaxAttentionHeadSize + 32);
  const Tensor qkv({B, T, 3 * C}), dout({B, T, C});
  Tensor out({B, T, C}), lse({B, H, T}), dqkv(qkv.shape()), workspace;
  try {
    kernels::fused_attention_forward(qkv, H, out, lse);
    FAIL() << "head size 160 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("head size 160 (320 channels / 2 heads) is above 128"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(kernels::fused_attention_backward(qkv, out, lse, dout, H, dqkv, workspace), Error);
}

TEST(FusedAttentionShapes, RejectsAnLseOfTheWrongShape) {
  const Tensor qkv({1, 4, 12});
  Tensor out({1, 4, 4}), lse({1, 2, 3});
  EXPECT_THROW(kernels::fused_attention_forward(qkv, 2, out, lse), Error);
}

// The layer on the fused kernels, dropout (on its output, keyed by seed, step and layer)
// off and on: the same step draws the same mask, so two forwards agree bit for bit, and
// the gradients hold against finite differences with the mask fixed.
class FusedAttentionLayer : public ::testing::TestWithParam<float> {};

TEST_P(FusedAttentionLayer, GradientsMatchFiniteDifferences) {
  const float dropout = GetParam();
  nn::CausalSelfAttention layer(/*heads=*/2, dropout, /*projection_std=*/0.02f);
  nn::ParameterArena arena;
  layer.build({9, 8}, "0.attn.", 0, arena);
  arena.allocate(Device::cpu());
  layer.bind(arena);
  Rng rng(21);
  layer.initialize(rng);
  float* params = arena.flat_params().data<float>();
  for (int64_t i = 0; i < arena.flat_params().numel(); ++i) params[i] = rng.uniform(-1.0f, 1.0f);
  nn::RunContext context;
  context.seed = 5;
  context.step = 3;
  layer.attach(&context);
  const Tensor x = random_tensor({2, 9, 8}, rng), upstream = random_tensor({2, 9, 8}, rng);
  const Tensor first = layer.forward(x, nn::Mode::kTrain).clone();
  const Tensor second = layer.forward(x, nn::Mode::kTrain).clone();
  EXPECT_TRUE(same_bits(first, second));
  arena.zero_grads();
  const Tensor dx = layer.backward(upstream, true).clone();
  const auto loss = [&] { return testing::weighted_sum(layer.forward(x, nn::Mode::kTrain), upstream); };
  for (size_t i = 0; i < arena.size(); ++i)
    EXPECT_LT(relative_error(arena.grad(i).to_vector(), testing::numerical_grad(arena.param(i), loss, 1e-2f)),
              testing::kGradTolerance)
        << arena.info(i).name;
  EXPECT_LT(relative_error(dx.to_vector(), testing::numerical_grad(x, loss, 1e-2f)), testing::kGradTolerance);
}

INSTANTIATE_TEST_SUITE_P(Dropout, FusedAttentionLayer, ::testing::Values(0.0f, 0.25f));

}  // namespace
}  // namespace mirrored
