// The layers whose matrix products and convolutions follow the model's precision (Linear,
// TokenLinear, Conv2d): bf16 forward and backward against float32, element by element
// within the bound of bf16_bounds.h, for the reduction length of each product. Bias
// gradients are plain float32 sums in Linear and TokenLinear and must not change at all.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "bf16_bounds.h"
#include "mirrored/core/error.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/conv.h"
#include "mirrored/nn/layers.h"
#include "mirrored/nn/transformer.h"

namespace mirrored {
namespace {

using namespace testing;

std::vector<float> values(const Tensor& t) {
  const float* p = t.data<float>();
  return std::vector<float>(p, p + t.numel());
}

Tensor random_tensor(const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Tensor t(shape);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = u(rng);
  return t;
}

Tensor absolute(const Tensor& t) {
  Tensor a(t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) a.data<float>()[i] = std::fabs(t.data<float>()[i]);
  return a;
}

// One layer outside a model: its own arena and run context.
struct LayerRun {
  std::vector<float> y, dx;
  std::vector<std::vector<float>> params, grads;  // in declaration order
};

LayerRun run_layer(std::unique_ptr<nn::Layer> layer, const Shape& sample, const Tensor& x, const Tensor& dy,
                   Precision precision) {
  nn::ParameterArena arena;
  nn::RunContext context;
  context.precision = precision;
  layer->build(sample, "0.", 0, arena);
  arena.allocate(Device::cpu());
  layer->bind(arena);
  Rng rng(17);
  layer->initialize(rng);
  layer->attach(&context);
  arena.zero_grads();
  LayerRun run;
  run.y = values(layer->forward(x, nn::Mode::kTrain));
  run.dx = values(layer->backward(dy, true));
  for (size_t i = 0; i < arena.size(); ++i) {
    run.params.push_back(values(arena.param(i)));
    run.grads.push_back(values(arena.grad(i)));
  }
  return run;
}

Tensor tensor_of(const std::vector<float>& v, const Shape& shape) {
  Tensor t(shape);
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

// The sums of absolute products of a dense layer y = x W^T + b (x [rows, in], W [out, in]):
// |x| |W|^T + |b| for y, |dy| |W| for dx, |dy|^T |x| for dW.
struct DenseScale {
  std::vector<float> y, dx, dw;
};
DenseScale dense_scale(const Tensor& x, const Tensor& dy, const LayerRun& run, int64_t rows, int64_t in, int64_t out) {
  const Tensor ax = absolute(x.reshape({rows, in})), ady = absolute(dy.reshape({rows, out}));
  const Tensor aw = absolute(tensor_of(run.params[0], {out, in}));
  Tensor y({rows, out}), dx({rows, in}), dw({out, in});
  kernels::gemm(false, true, 1.0f, ax, aw, 0.0f, y);
  kernels::add_bias(y, absolute(tensor_of(run.params[1], {out})));
  kernels::gemm(false, false, 1.0f, ady, aw, 0.0f, dx);
  kernels::gemm(true, false, 1.0f, ady, ax, 0.0f, dw);
  return {values(y), values(dx), values(dw)};
}

void expect_dense_layer_within_bound(const LayerRun& bf16, const LayerRun& f32, const DenseScale& scale, int64_t rows,
                                     int64_t in, int64_t out) {
  expect_within(bf16.y, f32.y, scale.y, bf16_vs_f32_bound(in), "y");
  expect_within(bf16.dx, f32.dx, scale.dx, bf16_vs_f32_bound(out), "dx");
  expect_within(bf16.grads[0], f32.grads[0], scale.dw, bf16_vs_f32_bound(rows), "dW");
  EXPECT_EQ(bf16.grads[1], f32.grads[1]) << "the bias gradient is a float32 sum in either precision";
  EXPECT_EQ(bf16.params, f32.params) << "parameters stay float32, initialised alike";
  EXPECT_TRUE(any_differs(bf16.y, f32.y) && any_differs(bf16.dx, f32.dx) && any_differs(bf16.grads[0], f32.grads[0]))
      << "bf16 equals fp32: the precision did not reach the products";
}

TEST(Bf16Layers, LinearForwardAndBackward) {
  const int64_t rows = 16, in = 96, out = 40;
  const Tensor x = random_tensor({rows, in}, 1), dy = random_tensor({rows, out}, 2);
  const auto bf16 = run_layer(std::make_unique<nn::Linear>(out), {in}, x, dy, Precision::kBF16);
  const auto f32 = run_layer(std::make_unique<nn::Linear>(out), {in}, x, dy, Precision::kF32);
  expect_dense_layer_within_bound(bf16, f32, dense_scale(x, dy, f32, rows, in, out), rows, in, out);
}

TEST(Bf16Layers, TokenLinearForwardAndBackward) {
  const int64_t batch = 3, tokens = 8, in = 64, out = 48;
  const Tensor x = random_tensor({batch, tokens, in}, 3), dy = random_tensor({batch, tokens, out}, 4);
  const auto bf16 = run_layer(std::make_unique<nn::TokenLinear>(out, 0.2f), {tokens, in}, x, dy, Precision::kBF16);
  const auto f32 = run_layer(std::make_unique<nn::TokenLinear>(out, 0.2f), {tokens, in}, x, dy, Precision::kF32);
  expect_dense_layer_within_bound(bf16, f32, dense_scale(x, dy, f32, batch * tokens, in, out), batch * tokens, in,
                                  out);
}

TEST(Bf16Layers, Conv2dForwardAndBackward) {
  const int64_t n = 4, c = 6, h = 10, oc = 8, k = 3;
  const Tensor x = random_tensor({n, c, h, h}, 5), dy = random_tensor({n, oc, h, h}, 6);
  auto make = [&] { return std::make_unique<nn::Conv2d>(oc, k, 1, 1); };
  const auto bf16 = run_layer(make(), {c, h, h}, x, dy, Precision::kBF16);
  const auto f32 = run_layer(make(), {c, h, h}, x, dy, Precision::kF32);
  // Sums of absolute products: the same convolution on absolute values (bias |b| added).
  const Tensor aw = absolute(tensor_of(f32.params[0], {oc, c, k, k})), ab = absolute(tensor_of(f32.params[1], {oc}));
  Tensor y({n, oc, h, h}), dx({n, c, h, h}), dw({oc, c, k, k}), db({oc}), workspace;
  dw.zero();
  db.zero();
  kernels::conv2d_forward(absolute(x), aw, &ab, {k, k, 1, 1}, y, workspace);
  kernels::conv2d_backward(absolute(x), aw, absolute(dy), {k, k, 1, 1}, &dx, dw, &db, workspace);
  expect_within(bf16.y, f32.y, values(y), bf16_vs_f32_bound(c * k * k), "y");
  expect_within(bf16.dx, f32.dx, values(dx), bf16_vs_f32_bound(oc * k * k), "dx");
  expect_within(bf16.grads[0], f32.grads[0], values(dw), bf16_vs_f32_bound(n * h * h), "dW");
  // The convolution's bias gradient sums the bf16-rounded dy (as oneDNN's bf16 primitive does).
  expect_within(bf16.grads[1], f32.grads[1], values(db), bf16_vs_f32_bound(n * h * h), "dbias");
  EXPECT_EQ(bf16.params, f32.params);
  EXPECT_TRUE(any_differs(bf16.y, f32.y) && any_differs(bf16.dx, f32.dx) && any_differs(bf16.grads[0], f32.grads[0]));
}

// The GPT's MLP (TokenLinear with GELU, then its projection) with the GELU values handed
// over in bfloat16 (feeds_products_only) against handed over in float32 and rounded by the
// projection: every output, input gradient and parameter gradient bit for bit, in bf16 and
// in float32 (where the flag changes nothing).
struct MlpRun {
  std::vector<float> y, dx;
  std::vector<std::vector<float>> grads;
  DType hidden_dtype = DType::kF32;
};

MlpRun run_mlp(bool feeds_products_only, Precision precision, const Tensor& x, const Tensor& dy, int64_t width) {
  nn::ParameterArena arena;
  nn::RunContext context;
  context.precision = precision;
  nn::TokenLinear fc(4 * width, 0.2f, /*bias=*/true, nn::Dense::Activation::kGelu, feeds_products_only);
  nn::TokenLinear projection(width, 0.2f);
  const Shape hidden = fc.build({x.dim(1), width}, "0.fc.", 0, arena);
  projection.build(hidden, "0.proj.", 0, arena);
  arena.allocate(Device::cpu());
  fc.bind(arena);
  projection.bind(arena);
  Rng rng(23);
  fc.initialize(rng);
  projection.initialize(rng);
  fc.attach(&context);
  projection.attach(&context);
  arena.zero_grads();
  MlpRun run;
  const Tensor& h = fc.forward(x, nn::Mode::kTrain);
  run.hidden_dtype = h.dtype();
  run.y = values(projection.forward(h, nn::Mode::kTrain));
  run.dx = values(fc.backward(projection.backward(dy, true), true));
  for (size_t i = 0; i < arena.size(); ++i) run.grads.push_back(values(arena.grad(i)));
  return run;
}

TEST(Bf16Layers, GeluValuesHandedOverInBf16GiveTheBitsOfRoundingThemInTheNextProducts) {
  const int64_t batch = 3, tokens = 20, width = 24;
  const Tensor x = random_tensor({batch, tokens, width}, 7), dy = random_tensor({batch, tokens, width}, 8);
  for (const Precision precision : {Precision::kBF16, Precision::kF32}) {
    SCOPED_TRACE(precision_name(precision));
    const MlpRun handed = run_mlp(true, precision, x, dy, width), rounded_later = run_mlp(false, precision, x, dy, width);
    EXPECT_EQ(handed.hidden_dtype, precision == Precision::kBF16 ? DType::kBF16 : DType::kF32);
    EXPECT_EQ(rounded_later.hidden_dtype, DType::kF32);
    EXPECT_EQ(handed.y, rounded_later.y);
    EXPECT_EQ(handed.dx, rounded_later.dx);
    EXPECT_EQ(handed.grads, rounded_later.grads);
  }
}

TEST(Bf16Layers, ABf16InputNeedsBf16ProductsAndTheHandOverNeedsGelu) {
  nn::ParameterArena arena;
  nn::TokenLinear layer(4, 0.2f);
  layer.build({2, 3}, "0.", 0, arena);
  arena.allocate(Device::cpu());
  layer.bind(arena);
  const Tensor x({1, 2, 3}, DType::kBF16);
  EXPECT_THROW(layer.forward(x, nn::Mode::kTrain), Error);  // float32 products (no model's context)
  EXPECT_THROW(nn::TokenLinear(4, 0.2f, true, nn::Dense::Activation::kNone, /*feeds_products_only=*/true), Error);
}

}  // namespace
}  // namespace mirrored
