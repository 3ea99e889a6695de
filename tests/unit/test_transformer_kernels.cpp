// The transformer ops on every device present, each against a naive loop worked out here
// in double: embeddings, layer norm, GELU, causal attention (forward and backward). Without
// a GPU the CUDA instances are skipped with the reason.
#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "attention_reference.h"
#include "devices.h"
#include "gradcheck.h"
#include "mirrored/core/error.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/kernels/transformer_math.h"

namespace mirrored {
namespace {

using testing::DeviceTest;
using testing::host_values;
using testing::random_tensor;
using testing::relative_error;

constexpr double kTight = 1e-5;  // float32 vs a double reference on O(1) values

Tensor token_tensor(const std::vector<int32_t>& values, Shape shape) {
  Tensor t(std::move(shape), DType::kI32);
  std::copy(values.begin(), values.end(), t.data<int32_t>());
  return t;
}

std::vector<float> as_floats(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }
std::vector<double> as_doubles(const Tensor& t) {
  const std::vector<float> v = t.to_vector();
  return std::vector<double>(v.begin(), v.end());
}

class TransformerKernelsOn : public DeviceTest {};

TEST_P(TransformerKernelsOn, EmbeddingAddsTokenAndPositionRows) {
  const int64_t b = 2, t = 3, v = 5, c = 4, p = 4;
  Rng rng(1);
  const Tensor wte = random_tensor({v, c}, rng), wpe = random_tensor({p, c}, rng);
  const Tensor tokens = token_tensor({4, 0, 4, 2, 2, 1}, {b, t});
  Tensor out = on_device(Tensor({b, t, c}));
  kernels::embedding_forward(on_device(tokens), on_device(wte), on_device(wpe), out);
  std::vector<double> expected;
  for (int64_t n = 0; n < b * t; ++n)
    for (int64_t j = 0; j < c; ++j)
      expected.push_back(static_cast<double>(wte.data<float>()[tokens.data<int32_t>()[n] * c + j]) +
                         wpe.data<float>()[(n % t) * c + j]);
  EXPECT_LT(relative_error(host_values(out), as_floats(expected)), kTight);
}

TEST_P(TransformerKernelsOn, EmbeddingBackwardScatterAddsRepeatedTokens) {
  const int64_t b = 2, t = 3, v = 5, c = 4, p = 3;
  Rng rng(2);
  const Tensor dout = random_tensor({b, t, c}, rng);
  const Tensor tokens = token_tensor({4, 0, 4, 2, 4, 1}, {b, t});  // token 4 three times, 3 never
  const Tensor dwte0 = random_tensor({v, c}, rng), dwpe0 = random_tensor({p, c}, rng);
  Tensor dwte = on_device(dwte0), dwpe = on_device(dwpe0);
  kernels::embedding_backward(on_device(tokens), on_device(dout), dwte, dwpe);
  std::vector<double> ewte = as_doubles(dwte0), ewpe = as_doubles(dwpe0);
  for (int64_t n = 0; n < b * t; ++n)
    for (int64_t j = 0; j < c; ++j) {
      ewte[static_cast<size_t>(tokens.data<int32_t>()[n] * c + j)] += dout.data<float>()[n * c + j];
      ewpe[static_cast<size_t>((n % t) * c + j)] += dout.data<float>()[n * c + j];
    }
  EXPECT_LT(relative_error(host_values(dwte), as_floats(ewte)), kTight);
  EXPECT_LT(relative_error(host_values(dwpe), as_floats(ewpe)), kTight);
}

TEST_P(TransformerKernelsOn, EmbeddingBackwardRepeatsBitForBit) {
  // Many repeats of few tokens: any order-dependent accumulation would show.
  const int64_t b = 8, t = 64, v = 7, c = 48;
  Rng rng(3);
  const Tensor dout = on_device(random_tensor({b, t, c}, rng));
  std::vector<int32_t> ids(static_cast<size_t>(b * t));
  for (auto& id : ids) id = static_cast<int32_t>(rng.below(v));
  const Tensor tokens = on_device(token_tensor(ids, {b, t}));
  auto run = [&] {
    Tensor dwte = on_device(Tensor({v, c})), dwpe = on_device(Tensor({t, c}));
    kernels::embedding_backward(tokens, dout, dwte, dwpe);
    std::vector<float> all = host_values(dwte);
    const std::vector<float> pos = host_values(dwpe);
    all.insert(all.end(), pos.begin(), pos.end());
    return all;
  };
  EXPECT_EQ(run(), run());
}

TEST_P(TransformerKernelsOn, EmbeddingRejectsBadShapes) {
  Tensor out = on_device(Tensor({1, 3, 4}));
  const Tensor wte = on_device(Tensor({5, 4})), short_wpe = on_device(Tensor({2, 4}));
  EXPECT_THROW(kernels::embedding_forward(on_device(token_tensor({0, 1, 2}, {1, 3})), wte, short_wpe, out), Error);
  Tensor float_tokens = on_device(Tensor({1, 3}));
  EXPECT_THROW(kernels::embedding_forward(float_tokens, wte, on_device(Tensor({3, 4})), out), Error);
}

TEST(TransformerKernels, EmbeddingRejectsATokenOutsideTheVocabularyOnTheCpu) {
  Tensor out({1, 2, 4});
  EXPECT_THROW(kernels::embedding_forward(token_tensor({0, 5}, {1, 2}), Tensor({5, 4}), Tensor({2, 4}), out), Error);
}

TEST_P(TransformerKernelsOn, LayerNormForwardAndBackwardMatchTheFormulas) {
  const int64_t rows = 6, c = 10;
  const float eps = 1e-5f;
  Rng rng(4);
  // A large common offset: the variance must come from centred values.
  const Tensor x = random_tensor({2, 3, c}, rng, 50.0f, 52.0f), dy = random_tensor(x.shape(), rng);
  const Tensor gamma = random_tensor({c}, rng, 0.5f, 1.5f), beta = random_tensor({c}, rng);
  const Tensor dgamma0 = random_tensor({c}, rng), dbeta0 = random_tensor({c}, rng);
  Tensor y = on_device(Tensor(x.shape())), mean = on_device(Tensor({rows})), rstd = on_device(Tensor({rows}));
  kernels::layer_norm_forward(on_device(x), on_device(gamma), on_device(beta), eps, y, mean, rstd);
  Tensor dx = on_device(Tensor(x.shape())), dgamma = on_device(dgamma0), dbeta = on_device(dbeta0), workspace;
  kernels::layer_norm_backward(on_device(x), on_device(dy), on_device(gamma), mean, rstd, dx, dgamma, dbeta,
                               workspace);

  std::vector<double> ey, emean, erstd, edx, edgamma = as_doubles(dgamma0), edbeta = as_doubles(dbeta0);
  const float* X = x.data<float>();
  const float* G = dy.data<float>();
  const float* W = gamma.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    double m = 0.0, var = 0.0;
    for (int64_t j = 0; j < c; ++j) m += X[r * c + j];
    m /= static_cast<double>(c);
    for (int64_t j = 0; j < c; ++j) var += (X[r * c + j] - m) * (X[r * c + j] - m);
    const double s = 1.0 / std::sqrt(var / static_cast<double>(c) + eps);
    emean.push_back(m);
    erstd.push_back(s);
    double mdg = 0.0, mdgx = 0.0;
    for (int64_t j = 0; j < c; ++j) {
      const double xhat = (X[r * c + j] - m) * s;
      ey.push_back(xhat * W[j] + beta.data<float>()[j]);
      mdg += static_cast<double>(G[r * c + j]) * W[j];
      mdgx += static_cast<double>(G[r * c + j]) * W[j] * xhat;
      edgamma[static_cast<size_t>(j)] += G[r * c + j] * xhat;
      edbeta[static_cast<size_t>(j)] += G[r * c + j];
    }
    mdg /= static_cast<double>(c);
    mdgx /= static_cast<double>(c);
    for (int64_t j = 0; j < c; ++j) {
      const double xhat = (X[r * c + j] - m) * s;
      edx.push_back(s * (static_cast<double>(G[r * c + j]) * W[j] - mdg - xhat * mdgx));
    }
  }
  EXPECT_LT(relative_error(host_values(y), as_floats(ey)), 1e-4);  // xhat of a 50 +- 1 input
  EXPECT_LT(relative_error(host_values(mean), as_floats(emean)), kTight);
  EXPECT_LT(relative_error(host_values(rstd), as_floats(erstd)), 1e-4);
  EXPECT_LT(relative_error(host_values(dx), as_floats(edx)), 1e-3);  // dx ~ rstd ~ 2: scale of values
  EXPECT_LT(relative_error(host_values(dgamma), as_floats(edgamma)), 1e-4);
  EXPECT_LT(relative_error(host_values(dbeta), as_floats(edbeta)), kTight);
}

TEST_P(TransformerKernelsOn, GeluForwardAndBackwardMatchTheTanhFormula) {
  Rng rng(5);
  const Tensor x = random_tensor({3, 17}, rng, -4.0f, 4.0f), dy = random_tensor(x.shape(), rng);
  Tensor y = on_device(Tensor(x.shape())), dx = on_device(Tensor(x.shape()));
  kernels::gelu_forward(on_device(x), y);
  kernels::gelu_backward(on_device(x), on_device(dy), dx);
  std::vector<double> ey, edx;
  const double k = std::sqrt(2.0 / M_PI);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = x.data<float>()[i];
    const double u = k * (v + 0.044715 * v * v * v);
    ey.push_back(0.5 * v * (1.0 + std::tanh(u)));
    // By central difference of the double formula: an independent check of the derivative.
    const double h = 1e-6;
    auto f = [&](double z) { return 0.5 * z * (1.0 + std::tanh(k * (z + 0.044715 * z * z * z))); };
    edx.push_back(dy.data<float>()[i] * (f(v + h) - f(v - h)) / (2 * h));
  }
  EXPECT_LT(relative_error(host_values(y), as_floats(ey)), kTight);
  EXPECT_LT(relative_error(host_values(dx), as_floats(edx)), kTight);
}

// The CPU kernel runs in the widest SIMD clone this CPU has (kernels/cpu/simd_dispatch.h);
// each must give the bits of the shared scalar formula, compiled here for the baseline.
// 1003 values: full vectors of every width, and a tail.
TEST(TransformerKernels, GeluOnTheCpuIsTheSharedFormulaBitForBit) {
  Rng rng(11);
  const Tensor x = random_tensor({1003}, rng, -6.0f, 6.0f), dy = random_tensor(x.shape(), rng);
  Tensor y(x.shape()), dx(x.shape());
  kernels::gelu_forward(x, y);
  kernels::gelu_backward(x, dy, dx);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float v = x.data<float>()[i];
    ASSERT_EQ(y.data<float>()[i], kernels::gelu(v)) << "x = " << v;
    ASSERT_EQ(dx.data<float>()[i], dy.data<float>()[i] * kernels::gelu_derivative(v)) << "x = " << v;
  }
}

// The mlp's bias and GELU in one pass each way (Dense::Activation::kGelu): forward has the
// bits of add_bias then gelu_forward and keeps the tanh; backward has gelu_backward's bits
// and adds the rows' sum, in row order, to the bias gradient it is given. 7 x 37: full
// vectors of every SIMD width and a tail in each row.
TEST(TransformerKernels, BiasGeluIsAddBiasThenGeluBitForBit) {
  const int64_t rows = 7, cols = 37;
  Rng rng(12);
  const Tensor product = random_tensor({rows, cols}, rng, -5.0f, 5.0f), bias = random_tensor({cols}, rng);
  const Tensor dy = random_tensor({rows, cols}, rng), dbias_before = random_tensor({cols}, rng);
  Tensor h = product.clone(), th({rows, cols}), y({rows, cols}), dh({rows, cols});
  kernels::bias_gelu_forward(h, bias, th, y);
  Tensor dbias = dbias_before.clone();
  kernels::bias_gelu_backward(h, th, dy, dh, dbias);
  const float* p = product.data<float>();
  const float* b = bias.data<float>();
  for (int64_t j = 0; j < cols; ++j) {
    float column_sum = 0.0f;
    double exact_sum = 0.0;
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t k = i * cols + j;
      const float x = p[k] + b[j];
      ASSERT_EQ(h.data<float>()[k], x) << "h at " << i << ", " << j;
      ASSERT_EQ(y.data<float>()[k], kernels::gelu(x)) << "y at " << i << ", " << j;
      ASSERT_EQ(th.data<float>()[k], kernels::tanh_approx(kernels::gelu_tanh_argument(x)));
      const float g = dy.data<float>()[k] * kernels::gelu_derivative(x);
      ASSERT_EQ(dh.data<float>()[k], g) << "dh at " << i << ", " << j;
      column_sum += g;
      exact_sum += g;
    }
    EXPECT_EQ(dbias.data<float>()[j], dbias_before.data<float>()[j] + column_sum) << "dbias at " << j;
    EXPECT_NEAR(dbias.data<float>()[j], dbias_before.data<float>()[j] + exact_sum, 1e-5) << "dbias at " << j;
  }
}

// A bf16 layer's GELU values and gradient rounded as they are formed (y or dh in bfloat16,
// on the CPU): the float32 kernel's values rounded by round_to_bf16, bit for bit, with the
// same h, tanh and bias gradient. The shapes cover one block of rows, several with a short
// last one, and rows wider than a block.
TEST(TransformerKernels, BiasGeluIntoBf16IsTheFloat32ValuesRounded) {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{7, 37}, {300, 37}, {5, 5000}, {1, 1}};
  auto bits = [](const Tensor& t) { return std::vector<uint16_t>(t.data<uint16_t>(), t.data<uint16_t>() + t.numel()); };
  for (const auto& [rows, cols] : shapes) {
    SCOPED_TRACE(::testing::Message() << rows << " x " << cols);
    Rng rng(static_cast<uint64_t>(rows * 7919 + cols));
    const Tensor product = random_tensor({rows, cols}, rng, -5.0f, 5.0f), bias = random_tensor({cols}, rng);
    const Tensor dy = random_tensor({rows, cols}, rng), dbias_before = random_tensor({cols}, rng);
    Tensor h = product.clone(), th({rows, cols}), y({rows, cols}), rounded;
    kernels::bias_gelu_forward(h, bias, th, y);
    Tensor h16 = product.clone(), th16({rows, cols}), y16({rows, cols}, DType::kBF16);
    kernels::bias_gelu_forward(h16, bias, th16, y16);
    kernels::round_to_bf16(y, rounded);
    EXPECT_EQ(bits(y16), bits(rounded)) << "y";
    EXPECT_EQ(h16.to_vector(), h.to_vector()) << "h";
    EXPECT_EQ(th16.to_vector(), th.to_vector()) << "th";

    Tensor dh({rows, cols}), dbias = dbias_before.clone();
    kernels::bias_gelu_backward(h, th, dy, dh, dbias);
    kernels::round_to_bf16(dh, rounded);
    Tensor dh16({rows, cols}, DType::kBF16), dbias16 = dbias_before.clone();
    kernels::bias_gelu_backward(h, th, dy, dh16, dbias16);
    EXPECT_EQ(bits(dh16), bits(rounded)) << "dh";
    EXPECT_EQ(dbias16.to_vector(), dbias.to_vector()) << "dbias";
  }
  Tensor h({2, 3}), th({2, 3}), dy({2, 3}), bias({3}), ids({2, 3}, DType::kI32);
  EXPECT_THROW(kernels::bias_gelu_forward(h, bias, th, ids), Error);
  EXPECT_THROW(kernels::bias_gelu_backward(h, th, dy, ids, bias), Error);
}

TEST(TransformerKernels, BiasGeluRejectsMismatchedShapes) {
  Tensor h({3, 4}), th({3, 4}), y({3, 4}), wrong({3, 5}), bias({4}), short_bias({3});
  EXPECT_THROW(kernels::bias_gelu_forward(h, short_bias, th, y), Error);
  EXPECT_THROW(kernels::bias_gelu_forward(h, bias, wrong, y), Error);
  EXPECT_THROW(kernels::bias_gelu_backward(h, th, wrong, y, bias), Error);
  EXPECT_THROW(kernels::bias_gelu_backward(h, th, y, y, short_bias), Error);
}

using testing::attention_reference;


TEST_P(TransformerKernelsOn, CausalAttentionForwardAndBackwardMatchTheReference) {
  const int64_t B = 2, T = 5, C = 12, H = 3;
  Rng rng(6);
  const Tensor qkv = random_tensor({B, T, 3 * C}, rng, -2.0f, 2.0f), dout = random_tensor({B, T, C}, rng);
  const auto ref = attention_reference(qkv, dout, H, /*with_probs=*/true);
  Tensor out = on_device(Tensor({B, T, C})), probs = on_device(random_tensor({B, H, T, T}, rng));  // stale values
  kernels::attention_forward(on_device(qkv), H, out, probs);
  Tensor dqkv = on_device(random_tensor(qkv.shape(), rng)), workspace;  // overwritten, not accumulated
  kernels::attention_backward(on_device(qkv), probs, on_device(dout), H, dqkv, workspace);
  EXPECT_LT(relative_error(host_values(probs), as_floats(ref.probs)), kTight);  // zeros above the diagonal too
  EXPECT_LT(relative_error(host_values(out), as_floats(ref.out)), kTight);
  EXPECT_LT(relative_error(host_values(dqkv), as_floats(ref.dqkv)), kTight);
}

TEST_P(TransformerKernelsOn, AttentionRejectsHeadsThatDoNotDivideTheWidth) {
  Tensor out = on_device(Tensor({1, 2, 6})), probs = on_device(Tensor({1, 4, 2, 2}));
  EXPECT_THROW(kernels::attention_forward(on_device(Tensor({1, 2, 18})), 4, out, probs), Error);
}

INSTANTIATE_TEST_SUITE_P(Devices, TransformerKernelsOn, ::testing::ValuesIn(testing::kTestDevices),
                         testing::device_name);

}  // namespace
}  // namespace mirrored
