// CPU vs GPU for the transformer ops on inputs large enough to exercise the launch shapes
// (several warps per row, several token tiles, many vocabulary blocks), and for a whole
// small GPT's forward and backward. Without a GPU every test is skipped with the reason.
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "devices.h"
#include "gradcheck.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/builders.h"
#include "mirrored/nn/loss.h"

namespace mirrored {
namespace {

using testing::host_values;
using testing::random_tensor;
using testing::relative_error;

constexpr double kAgree = 1e-5;  // float32 on both sides, sums in different orders

// The context for cuda:0 comes with the fixture: GPU tensors need its compute stream.
class TransformerCpuGpu : public testing::CudaTest {
 protected:
  static Tensor gpu(const Tensor& t) { return testing::to_device(t, Device::cuda(0)); }
};

Tensor random_tokens(const Shape& shape, int64_t vocab, Rng& rng) {
  Tensor t(shape, DType::kI32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<int32_t>()[i] = static_cast<int32_t>(rng.below(vocab));
  return t;
}

TEST_F(TransformerCpuGpu, EmbeddingForwardAndBackwardAgreeBitForBit) {
  // 1000 > 256 vocabulary rows (several per block) and 4 * 700 tokens (several tiles).
  const int64_t b = 4, t = 700, v = 1000, c = 72;
  Rng rng(1);
  const Tensor tokens = random_tokens({b, t}, v, rng);
  const Tensor wte = random_tensor({v, c}, rng), wpe = random_tensor({t, c}, rng);
  const Tensor dout = random_tensor({b, t, c}, rng);
  Tensor out({b, t, c}), gout = gpu(out);
  kernels::embedding_forward(tokens, wte, wpe, out);
  kernels::embedding_forward(gpu(tokens), gpu(wte), gpu(wpe), gout);
  EXPECT_EQ(host_values(gout), host_values(out));
  Tensor dwte = random_tensor({v, c}, rng), dwpe = random_tensor({t, c}, rng);
  Tensor gdwte = gpu(dwte), gdwpe = gpu(dwpe);
  kernels::embedding_backward(tokens, dout, dwte, dwpe);
  kernels::embedding_backward(gpu(tokens), gpu(dout), gdwte, gdwpe);
  // The same additions in the same order on both sides.
  EXPECT_EQ(host_values(gdwte), host_values(dwte));
  EXPECT_EQ(host_values(gdwpe), host_values(dwpe));
}

TEST_F(TransformerCpuGpu, LayerNormAgrees) {
  const int64_t rows = 300, c = 200;  // more rows than the GPU's 64 gradient chunks
  Rng rng(2);
  const Tensor x = random_tensor({3, 100, c}, rng, -3.0f, 5.0f), dy = random_tensor(x.shape(), rng);
  const Tensor gamma = random_tensor({c}, rng, 0.5f, 1.5f), beta = random_tensor({c}, rng);
  struct Side {
    Tensor y, mean, rstd, dx, dgamma, dbeta, workspace;
  };
  auto run = [&](Device d) {
    auto on = [&](const Tensor& t) { return testing::to_device(t, d); };
    Side s{on(Tensor(x.shape())), on(Tensor({rows})), on(Tensor({rows})), on(Tensor(x.shape())),
           on(Tensor({c})), on(Tensor({c})), Tensor()};
    kernels::layer_norm_forward(on(x), on(gamma), on(beta), 1e-5f, s.y, s.mean, s.rstd);
    kernels::layer_norm_backward(on(x), on(dy), on(gamma), s.mean, s.rstd, s.dx, s.dgamma, s.dbeta, s.workspace);
    return s;
  };
  const Side cpu = run(Device::cpu()), cuda = run(Device::cuda(0));
  EXPECT_LT(relative_error(host_values(cuda.y), host_values(cpu.y)), kAgree);
  EXPECT_LT(relative_error(host_values(cuda.mean), host_values(cpu.mean)), kAgree);
  EXPECT_LT(relative_error(host_values(cuda.rstd), host_values(cpu.rstd)), kAgree);
  EXPECT_LT(relative_error(host_values(cuda.dx), host_values(cpu.dx)), kAgree);
  EXPECT_LT(relative_error(host_values(cuda.dgamma), host_values(cpu.dgamma)), 1e-4);  // sums of 300 terms
  EXPECT_LT(relative_error(host_values(cuda.dbeta), host_values(cpu.dbeta)), 1e-4);
}

// GELU is element-wise on the shared formulas of kernels/transformer_math.h (no libm
// calls; division correctly rounded on both devices), compiled with -fmad=false on the GPU
// as the CPU's with -ffp-contract=off: the same bits, over the range where tanh saturates.
TEST_F(TransformerCpuGpu, GeluGivesTheCpuBits) {
  Rng rng(3);
  const Tensor x = random_tensor({1000, 37}, rng, -12.0f, 12.0f), dy = random_tensor(x.shape(), rng);
  Tensor y(x.shape()), dx(x.shape()), gy = gpu(y), gdx = gpu(dx);
  kernels::gelu_forward(x, y);
  kernels::gelu_backward(x, dy, dx);
  kernels::gelu_forward(gpu(x), gy);
  kernels::gelu_backward(gpu(x), gpu(dy), gdx);
  EXPECT_EQ(host_values(gy), host_values(y));
  EXPECT_EQ(host_values(gdx), host_values(dx));
}

TEST_F(TransformerCpuGpu, CausalAttentionAgrees) {
  // T = 70: rows longer than a warp; 4 heads of 16 channels.
  const int64_t b = 3, t = 70, c = 64, heads = 4;
  Rng rng(4);
  const Tensor qkv = random_tensor({b, t, 3 * c}, rng), dout = random_tensor({b, t, c}, rng);
  Tensor out({b, t, c}), probs({b, heads, t, t}), dqkv(qkv.shape()), workspace;
  Tensor gout = gpu(out), gprobs = gpu(probs), gdqkv = gpu(dqkv), gworkspace;
  kernels::attention_forward(qkv, heads, out, probs);
  kernels::attention_backward(qkv, probs, dout, heads, dqkv, workspace);
  kernels::attention_forward(gpu(qkv), heads, gout, gprobs);
  kernels::attention_backward(gpu(qkv), gprobs, gpu(dout), heads, gdqkv, gworkspace);
  EXPECT_LT(relative_error(host_values(gprobs), host_values(probs)), kAgree);
  EXPECT_LT(relative_error(host_values(gout), host_values(out)), kAgree);
  EXPECT_LT(relative_error(host_values(gdqkv), host_values(dqkv)), kAgree);
}

// The fused kernels: contexts across the GPU's 32-key tiles and 64-row blocks and the CPU's
// 64-key blocks, head sizes of 16 (rounded up to 32 on the GPU), 64 and 128 (the largest,
// kernels::kMaxAttentionHeadSize), and more (batch, head) pairs than a grid's y dimension
// holds (65,535: the GPU launches them in chunks). Both sides keep float32 running sums over
// different block sizes; 1e-5 relative as for the others.
TEST_F(TransformerCpuGpu, FusedAttentionAgrees) {
  for (const auto& [b, t, c, heads] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{2, 70, 64, 4},
                                       {2, 257, 128, 2},
                                       {2, 1024, 64, 1},
                                       {2, 100, 256, 2},
                                       {1100, 3, 64, 64}}) {
    Rng rng(static_cast<uint64_t>(t));
    const Tensor qkv = random_tensor({b, t, 3 * c}, rng, -2.0f, 2.0f), dout = random_tensor({b, t, c}, rng);
    Tensor out({b, t, c}), lse({b, heads, t}), dqkv(qkv.shape()), workspace;
    Tensor gout = gpu(out), glse = gpu(lse), gdqkv = gpu(dqkv), gworkspace;
    kernels::fused_attention_forward(qkv, heads, out, lse);
    kernels::fused_attention_backward(qkv, out, lse, dout, heads, dqkv, workspace);
    kernels::fused_attention_forward(gpu(qkv), heads, gout, glse);
    kernels::fused_attention_backward(gpu(qkv), gout, glse, gpu(dout), heads, gdqkv, gworkspace);
    EXPECT_LT(relative_error(host_values(gout), host_values(out)), kAgree) << "B " << b << " T " << t << " C " << c;
    EXPECT_LT(relative_error(host_values(glse), host_values(lse)), kAgree) << "B " << b << " T " << t << " C " << c;
    EXPECT_LT(relative_error(host_values(gdqkv), host_values(dqkv)), kAgree) << "B " << b << " T " << t << " C " << c;
  }
}

// Head sizes above 128 are refused on the GPU as on the CPU, before any kernel runs.
TEST_F(TransformerCpuGpu, FusedAttentionRefusesHeadSizesAbove128) {
  const int64_t b = 1, t = 4, heads = 2, c = heads * 160;
  Tensor qkv = gpu(Tensor({b, t, 3 * c})), out = gpu(Tensor({b, t, c})), lse = gpu(Tensor({b, heads, t}));
  EXPECT_THROW(kernels::fused_attention_forward(qkv, heads, out, lse), Error);
}

TEST_F(TransformerCpuGpu, SmallGptForwardAndBackwardAgree) {
  nn::GptSpec spec;
  spec.vocab = 97;
  spec.context = 33;
  spec.width = 32;
  spec.heads = 4;
  spec.layers = 2;
  Rng rng(5);
  const int64_t batch = 3, rows = batch * spec.context;
  const Tensor tokens = random_tokens({batch, spec.context}, spec.vocab, rng);
  const Tensor targets = random_tokens({rows}, spec.vocab, rng);
  struct Side {
    double loss = 0.0;
    std::vector<float> logits, grads;
  };
  auto run = [&](Device d) {
    nn::Model model = nn::gpt(spec);
    model.build({spec.context}, d);
    model.initialize(6);
    nn::CrossEntropyLoss criterion;
    const Tensor& logits = model.forward(testing::to_device(tokens, d), nn::Mode::kTrain);
    Side s;
    s.loss = criterion.forward(logits.reshape({rows, spec.vocab}), testing::to_device(targets, d), true).loss_sum;
    s.logits = host_values(logits);
    model.parameters().zero_grads();
    model.backward(criterion.grad().reshape({batch, spec.context, spec.vocab}));
    s.grads = host_values(model.parameters().flat_grads());
    return s;
  };
  const Side cpu = run(Device::cpu()), cuda = run(Device::cuda(0));
  EXPECT_NEAR(cuda.loss, cpu.loss, 1e-5 * cpu.loss);
  EXPECT_LT(relative_error(cuda.logits, cpu.logits), kAgree);
  EXPECT_LT(relative_error(cuda.grads, cpu.grads), 1e-4);
}

}  // namespace
}  // namespace mirrored
