// The two CPU convolution backends (im2col + sgemm, oneDNN) called directly on the same
// cases: they must agree, including the accumulate-into semantics of dweight and dbias,
// null dx / dbias, and the mixed split conv2d_backward uses for few input channels. The
// im2col path itself is checked against the definition in test_conv_kernels.cpp.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "../../src/kernels/cpu/conv_backends.h"
#include "gradcheck.h"

namespace mirrored {
namespace {

using kernels::ConvShape;
using kernels::cpu::ConvBackend;
using testing::relative_error;

struct BackendCase {
  int64_t n, c, h, w, oc, k, stride, pad;
};

ConvShape shape_of(const BackendCase& k) {
  ConvShape s;
  s.n = k.n, s.c = k.c, s.h = k.h, s.w = k.w, s.oc = k.oc, s.kh = k.k, s.kw = k.k, s.stride = k.stride,
  s.pad = k.pad;
  s.oh = kernels::conv_output_size(k.h, k.k, k.stride, k.pad);
  s.ow = kernels::conv_output_size(k.w, k.k, k.stride, k.pad);
  return s;
}

std::vector<float> random_vector(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& e : v) e = u(rng);
  return v;
}

struct Buffers {
  std::vector<float> x, w, b, dy, dw0, db0, workspace;
  explicit Buffers(const ConvShape& s) {
    std::mt19937 rng(11);
    x = random_vector(s.n * s.c * s.h * s.w, rng);
    w = random_vector(s.oc * s.c * s.kh * s.kw, rng);
    b = random_vector(s.oc, rng);
    dy = random_vector(s.n * s.oc * s.oh * s.ow, rng);
    dw0 = random_vector(s.oc * s.c * s.kh * s.kw, rng);  // gradients already there: added to
    db0 = random_vector(s.oc, rng);
    workspace.resize(static_cast<size_t>(kernels::cpu::conv2d_workspace_floats(s)));
  }
};

struct Grads {
  std::vector<float> dx, dw, db;
};

Grads backward(ConvBackend data, ConvBackend weights, const ConvShape& s, Buffers& buf, bool want_dx,
               bool want_db) {
  Grads g{std::vector<float>(buf.x.size(), 123.0f), buf.dw0, buf.db0};
  kernels::cpu::conv2d_backward_with(data, weights, buf.x.data(), buf.w.data(), buf.dy.data(), s,
                                     want_dx ? g.dx.data() : nullptr, g.dw.data(), want_db ? g.db.data() : nullptr,
                                     buf.workspace.data());
  return g;
}

class ConvBackends : public ::testing::TestWithParam<BackendCase> {
 protected:
  void SetUp() override {
    if (!kernels::cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN";
  }
};

TEST_P(ConvBackends, ForwardAgrees) {
  const ConvShape s = shape_of(GetParam());
  Buffers buf(s);
  for (const bool bias : {true, false}) {
    std::vector<float> ref(buf.dy.size()), got(buf.dy.size(), 123.0f);
    const float* b = bias ? buf.b.data() : nullptr;
    kernels::cpu::conv2d_forward_with(ConvBackend::kIm2col, buf.x.data(), buf.w.data(), b, s, ref.data(),
                                      buf.workspace.data());
    kernels::cpu::conv2d_forward_with(ConvBackend::kOneDnn, buf.x.data(), buf.w.data(), b, s, got.data(),
                                      buf.workspace.data());
    EXPECT_LT(relative_error(got, ref), 1e-5) << "bias " << bias;
  }
}

TEST_P(ConvBackends, BackwardAgreesAndAccumulates) {
  const ConvShape s = shape_of(GetParam());
  Buffers buf(s);
  const Grads ref = backward(ConvBackend::kIm2col, ConvBackend::kIm2col, s, buf, true, true);
  // Twice: the second call reuses the cached primitives and must give the same bits.
  for (int call = 0; call < 2; ++call) {
    const Grads got = backward(ConvBackend::kOneDnn, ConvBackend::kOneDnn, s, buf, true, true);
    EXPECT_LT(relative_error(got.dx, ref.dx), 1e-5) << "call " << call;
    EXPECT_LT(relative_error(got.dw, ref.dw), 1e-4) << "call " << call;
    EXPECT_LT(relative_error(got.db, ref.db), 1e-4) << "call " << call;
  }
  const Grads first = backward(ConvBackend::kOneDnn, ConvBackend::kOneDnn, s, buf, true, true);
  const Grads again = backward(ConvBackend::kOneDnn, ConvBackend::kOneDnn, s, buf, true, true);
  EXPECT_EQ(first.dx, again.dx);
  EXPECT_EQ(first.dw, again.dw);
  EXPECT_EQ(first.db, again.db);
}

TEST_P(ConvBackends, MixedBackwardAndNullOutputs) {
  const ConvShape s = shape_of(GetParam());
  Buffers buf(s);
  const Grads ref = backward(ConvBackend::kIm2col, ConvBackend::kIm2col, s, buf, true, true);
  for (const ConvBackend data : {ConvBackend::kIm2col, ConvBackend::kOneDnn}) {
    const ConvBackend weights = data == ConvBackend::kIm2col ? ConvBackend::kOneDnn : ConvBackend::kIm2col;
    const Grads mixed = backward(data, weights, s, buf, true, true);
    EXPECT_LT(relative_error(mixed.dx, ref.dx), 1e-5);
    EXPECT_LT(relative_error(mixed.dw, ref.dw), 1e-4);
    EXPECT_LT(relative_error(mixed.db, ref.db), 1e-4);
  }
  // No dx, no dbias: dweight alone, dbias's buffer untouched.
  const Grads only_dw = backward(ConvBackend::kOneDnn, ConvBackend::kOneDnn, s, buf, false, false);
  EXPECT_LT(relative_error(only_dw.dw, ref.dw), 1e-4);
  EXPECT_EQ(only_dw.db, buf.db0);
  EXPECT_EQ(only_dw.dx, std::vector<float>(buf.x.size(), 123.0f));
}

INSTANTIATE_TEST_SUITE_P(Cases, ConvBackends,
                         ::testing::Values(BackendCase{4, 32, 12, 12, 64, 5, 1, 0},  // the cnn's second layer
                                           BackendCase{3, 1, 28, 28, 8, 5, 1, 0},    // one input channel
                                           BackendCase{2, 16, 14, 14, 16, 3, 1, 1},  // 3x3, padding 1
                                           BackendCase{2, 8, 11, 9, 12, 3, 2, 1},    // stride 2, not square
                                           BackendCase{2, 6, 7, 7, 10, 1, 1, 0},     // 1x1
                                           BackendCase{2, 3, 9, 9, 5, 1, 2, 0},      // 1x1, stride 2
                                           BackendCase{1, 5, 8, 10, 7, 4, 2, 2}));   // even kernel, pad 2

}  // namespace
}  // namespace mirrored
