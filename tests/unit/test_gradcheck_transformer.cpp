// Analytic gradients of the transformer layers and of a whole tiny GPT against central
// finite differences (see gradcheck.h for the error budget behind kGradTolerance).
// Parameters are redrawn as O(1) values before each check: with GPT-2's 0.02 init most
// gradients would be so small that the absolute floor of relative_error would hide errors.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "gradcheck.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/builders.h"
#include "mirrored/nn/loss.h"
#include "mirrored/nn/transformer.h"

namespace mirrored {
namespace {

using testing::kGradTolerance;
using testing::numerical_grad;
using testing::random_tensor;
using testing::relative_error;
using testing::weighted_sum;

void redraw(Tensor& params, Rng& rng, float bound) {
  float* p = params.data<float>();
  for (int64_t i = 0; i < params.numel(); ++i) p[i] = rng.uniform(-bound, bound);
}

Tensor random_tokens(const Shape& shape, int64_t vocab, Rng& rng) {
  Tensor t(shape, DType::kI32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<int32_t>()[i] = static_cast<int32_t>(rng.below(vocab));
  return t;
}

// Checks every parameter gradient and the input gradient of `layer`, alone on its own
// arena, for L = sum(y * upstream) on a batch of `batch` samples of shape `sample`.
void check_layer(nn::Layer& layer, const Shape& sample, int64_t batch, uint64_t seed) {
  nn::ParameterArena arena;
  Shape out_sample = layer.build(sample, "0.layer.", 0, arena);
  arena.allocate(Device::cpu());
  layer.bind(arena);
  Rng rng(seed);
  layer.initialize(rng);
  redraw(arena.flat_params(), rng, 1.0f);
  Shape in_shape = sample, out_shape = out_sample;
  in_shape.insert(in_shape.begin(), batch);
  out_shape.insert(out_shape.begin(), batch);
  Tensor x = random_tensor(in_shape, rng);
  const Tensor upstream = random_tensor(out_shape, rng);

  layer.forward(x, nn::Mode::kTrain);
  arena.zero_grads();
  const Tensor dx = layer.backward(upstream, /*need_input_grad=*/true).clone();
  ASSERT_EQ(dx.shape(), x.shape());
  const auto loss = [&] { return weighted_sum(layer.forward(x, nn::Mode::kTrain), upstream); };
  for (size_t i = 0; i < arena.size(); ++i) {
    const std::vector<float> numeric = numerical_grad(arena.param(i), loss, 1e-2f);
    EXPECT_LT(relative_error(arena.grad(i).to_vector(), numeric), kGradTolerance) << arena.info(i).name;
  }
  EXPECT_LT(relative_error(dx.to_vector(), numerical_grad(x, loss, 1e-2f)), kGradTolerance) << "input";
}

TEST(GradcheckTransformer, TokenLinear) {
  nn::TokenLinear layer(5, 0.02f);
  check_layer(layer, {3, 4}, 2, 1);
}

// The mlp's first projection: bias and GELU fused (Dense::Activation::kGelu).
TEST(GradcheckTransformer, TokenLinearWithGelu) {
  nn::TokenLinear layer(5, 0.02f, /*bias=*/true, nn::Dense::Activation::kGelu);
  check_layer(layer, {3, 4}, 2, 6);
}

// The fused layer against the two it replaces, on the same parameters: the same output,
// input gradient and weight gradient bits; the bias gradient the same sum (its order may
// differ from the matrix product's).
TEST(GradcheckTransformer, TokenLinearWithGeluIsTokenLinearThenGelu) {
  const Shape sample = {3, 7};
  const int64_t batch = 2, out = 9;
  nn::ParameterArena fused_arena, plain_arena;
  nn::TokenLinear fused(out, 0.02f, /*bias=*/true, nn::Dense::Activation::kGelu), plain(out, 0.02f);
  nn::Gelu gelu;
  fused.build(sample, "0.fc.", 0, fused_arena);
  const Shape hidden = plain.build(sample, "0.fc.", 0, plain_arena);
  gelu.build(hidden, "1.gelu.", 1, plain_arena);
  fused_arena.allocate(Device::cpu());
  plain_arena.allocate(Device::cpu());
  fused.bind(fused_arena);
  plain.bind(plain_arena);
  Rng rng(21);
  redraw(fused_arena.flat_params(), rng, 1.0f);
  kernels::copy(fused_arena.flat_params(), plain_arena.flat_params());
  const Tensor x = random_tensor({batch, sample[0], sample[1]}, rng);
  const Tensor upstream = random_tensor({batch, sample[0], out}, rng);
  const std::vector<float> y_fused = fused.forward(x, nn::Mode::kTrain).to_vector();
  const std::vector<float> y_plain = gelu.forward(plain.forward(x, nn::Mode::kTrain), nn::Mode::kTrain).to_vector();
  EXPECT_EQ(y_fused, y_plain);
  fused_arena.zero_grads();
  plain_arena.zero_grads();
  const std::vector<float> dx_fused = fused.backward(upstream, true).to_vector();
  const std::vector<float> dx_plain = plain.backward(gelu.backward(upstream, true), true).to_vector();
  EXPECT_EQ(dx_fused, dx_plain);
  EXPECT_EQ(fused_arena.grad(0).to_vector(), plain_arena.grad(0).to_vector()) << "weight";
  EXPECT_LT(relative_error(fused_arena.grad(1).to_vector(), plain_arena.grad(1).to_vector()), 1e-6) << "bias";
}

TEST(GradcheckTransformer, DenseWithGeluNeedsABias) {
  EXPECT_THROW(nn::TokenLinear(5, 0.02f, /*bias=*/false, nn::Dense::Activation::kGelu), Error);
}

TEST(GradcheckTransformer, LayerNorm) {
  nn::LayerNorm layer;
  check_layer(layer, {3, 6}, 2, 2);
}

TEST(GradcheckTransformer, Gelu) {
  nn::Gelu layer;
  check_layer(layer, {3, 5}, 2, 3);
}

TEST(GradcheckTransformer, CausalSelfAttention) {
  nn::CausalSelfAttention layer(/*heads=*/2, /*dropout=*/0.0f, /*projection_std=*/0.02f);
  check_layer(layer, {4, 6}, 2, 4);
}

TEST(GradcheckTransformer, TransformerBlock) {
  nn::TransformerBlock layer(/*heads=*/2, /*dropout=*/0.0f, /*projection_std=*/0.02f);
  check_layer(layer, {4, 6}, 2, 5);
}

// The embedding and a head tied to it on one arena: wte's gradient must hold both uses.
TEST(GradcheckTransformer, EmbeddingAndTiedHeadShareOneTable) {
  const int64_t vocab = 6, context = 4, width = 5, batch = 2, tokens_per_row = 3;
  nn::ParameterArena arena;
  nn::Embedding embedding(vocab, context, width);
  nn::TiedLmHead head(embedding);
  const Shape hidden = embedding.build({tokens_per_row}, "0.embedding.", 0, arena);
  EXPECT_EQ(head.build(hidden, "1.lm_head.", 1, arena), Shape({tokens_per_row, vocab}));
  ASSERT_EQ(arena.size(), 2u);  // wte and wpe, nothing for the head
  arena.allocate(Device::cpu());
  embedding.bind(arena);
  head.bind(arena);
  Rng rng(6);
  embedding.initialize(rng);
  redraw(arena.flat_params(), rng, 1.0f);
  const Tensor tokens = random_tokens({batch, tokens_per_row}, vocab, rng);
  const Tensor upstream = random_tensor({batch, tokens_per_row, vocab}, rng);
  const auto loss = [&] {
    return weighted_sum(head.forward(embedding.forward(tokens, nn::Mode::kTrain), nn::Mode::kTrain), upstream);
  };
  loss();
  arena.zero_grads();
  embedding.backward(head.backward(upstream, true), false);
  for (size_t i = 0; i < arena.size(); ++i) {
    const std::vector<float> numeric = numerical_grad(arena.param(i), loss, 1e-2f);
    EXPECT_LT(relative_error(arena.grad(i).to_vector(), numeric), kGradTolerance) << arena.info(i).name;
  }
}

nn::GptSpec tiny_gpt(float dropout = 0.0f) {
  nn::GptSpec spec;
  spec.vocab = 11;
  spec.context = 5;
  spec.width = 8;
  spec.heads = 2;
  spec.layers = 2;
  spec.dropout = dropout;
  return spec;
}

TEST(GradcheckTransformer, WholeTinyGptWithTiedHead) {
  const nn::GptSpec spec = tiny_gpt();
  nn::Model model = nn::gpt(spec);
  model.build({spec.context});
  model.initialize(7);
  Rng rng(8);
  redraw(model.parameters().flat_params(), rng, 1.0f);
  const int64_t batch = 3;
  const Tensor tokens = random_tokens({batch, spec.context}, spec.vocab, rng);
  const Tensor targets = random_tokens({batch, spec.context}, spec.vocab, rng);
  nn::CrossEntropyLoss criterion;
  // The summed loss over the B * T positions, not the mean: gradients of O(1), well above
  // the absolute floor of relative_error. The loss takes the [B, T, V] logits and [B, T]
  // targets as the trainer gives them.
  const int64_t rows = batch * spec.context;
  const auto loss = [&] {
    const Tensor& logits = model.forward(tokens, nn::Mode::kTrain);
    return criterion.forward(logits, targets, false).loss_sum;
  };
  const Tensor& logits = model.forward(tokens, nn::Mode::kTrain);
  ASSERT_EQ(logits.shape(), Shape({batch, spec.context, spec.vocab}));
  const auto value = criterion.forward(logits, targets, true);
  EXPECT_EQ(value.count, rows);
  ASSERT_EQ(criterion.grad().shape(), logits.shape()) << "the gradient comes back in the logits' shape";
  model.parameters().zero_grads();
  model.backward(criterion.grad());
  kernels::scale(model.parameters().flat_grads(), static_cast<float>(rows));  // d(sum) = rows d(mean)

  nn::ParameterArena& arena = model.parameters();
  int tables = 0;
  for (size_t i = 0; i < arena.size(); ++i) {
    tables += arena.info(i).name.find("wte") != std::string::npos;
    const std::vector<float> numeric = numerical_grad(arena.param(i), loss, 1e-2f);
    EXPECT_LT(relative_error(arena.grad(i).to_vector(), numeric), kGradTolerance) << arena.info(i).name;
  }
  EXPECT_EQ(tables, 1) << "the tied token table is held once";
}

TEST(GradcheckTransformer, GptParameterCountMatchesGpt2Formula) {
  // 12 C^2 + 13 C per block, (V + P) C for the tables, 2 C for the final norm; the head is tied.
  const nn::GptSpec spec = tiny_gpt();
  nn::Model model = nn::gpt(spec);
  model.build({spec.context});
  const int64_t c = spec.width;
  EXPECT_EQ(model.parameters().numel(),
            spec.layers * (12 * c * c + 13 * c) + (spec.vocab + spec.context) * c + 2 * c);
  // The tied table belongs to the embedding (layer 0): the gradient reducer, which waits for
  // a parameter's layer, reduces it only after both uses have added their part.
  const size_t head = model.num_layers() - 1;
  EXPECT_EQ(model.layer(head).kind(), "lm_head");
  for (const nn::ParameterInfo& info : model.parameters().infos()) {
    EXPECT_NE(info.layer, head) << info.name;
    if (info.name.find("wte") != std::string::npos) EXPECT_EQ(info.layer, 0u);
  }
}

// Dropout masks follow the global sample, not the split: two replicas of half the batch
// each see exactly the rows one replica of the whole batch sees.
TEST(GradcheckTransformer, GptDropoutMasksDependOnTheGlobalSampleOnly) {
  const nn::GptSpec spec = tiny_gpt(0.3f);
  Rng rng(9);
  const int64_t batch = 4, half = 2;
  const Tensor tokens = random_tokens({batch, spec.context}, spec.vocab, rng);
  Tensor second_half({half, spec.context}, DType::kI32);
  std::copy(tokens.data<int32_t>() + half * spec.context, tokens.data<int32_t>() + batch * spec.context,
            second_half.data<int32_t>());
  auto run = [&](const Tensor& x, int64_t first_sample) {
    nn::Model model = nn::gpt(spec);
    model.build({spec.context});
    model.initialize(10);
    model.set_random_seed(11);
    model.set_step(3);
    model.set_first_sample(first_sample);
    return model.forward(x, nn::Mode::kTrain).to_vector();
  };
  const std::vector<float> whole = run(tokens, 0);
  const std::vector<float> second = run(second_half, half);
  const size_t row = static_cast<size_t>(spec.context * spec.vocab);
  // Equal up to the GEMMs' rounding: a BLAS may pick another kernel (and summation order)
  // for half the rows. A different dropout mask would move outputs by ~1e-1, not 1e-6.
  ASSERT_EQ(second.size(), whole.size() - half * row);
  for (size_t i = 0; i < second.size(); ++i) ASSERT_NEAR(second[i], whole[half * row + i], 1e-5f) << "output " << i;
  // And dropout is on: the same rows without it differ.
  nn::Model plain = nn::gpt(spec);
  plain.build({spec.context});
  plain.initialize(10);
  EXPECT_NE(plain.forward(tokens, nn::Mode::kEval).to_vector(), whole);
}

}  // namespace
}  // namespace mirrored
