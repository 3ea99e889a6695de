// Convolutions through oneDNN, compiled only with MIRRORED_WITH_ONEDNN.
//
// oneDNN picks its own blocked layouts (format_tag::any: channels in blocks of 16 for
// AVX-512), and every call reorders the framework's plain NCHW / OIHW tensors into them and
// the results back. Measured single-threaded with AVX-512, that round trip still beats
// im2col + sgemm 2-3x; oneDNN on plain layouts does not.
//
// Everything a shape needs (primitive descriptors, primitives, reorders, the blocked
// buffers) is made on its first call and kept: steady-state calls allocate nothing.
//
// Thread safety: the cache below is not locked. Kernels run on the main thread only (the
// communication thread moves gradients, it never calls a kernel); a second kernel thread
// would need a lock here or a cache per thread.
#ifdef MIRRORED_WITH_ONEDNN

#include <omp.h>

#include <dnnl.hpp>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "conv_backends.h"
#include "dnnl_context.h"
#include "mirrored/core/error.h"
#include "mirrored/core/strings.h"

namespace mirrored::kernels::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;
using Args = std::unordered_map<int, memory>;

memory::dim dim(int64_t v) { return static_cast<memory::dim>(v); }

// A tensor the framework owns in a plain layout (its pointer set per call) and, when the
// primitive wants another layout, a blocked buffer of its own with the reorders between.
struct Operand {
  memory user, blocked;
  bool reordered = false;
  std::optional<dnnl::reorder> to_blocked, to_user;

  Operand() = default;
  Operand(const memory::desc& plain, const memory::desc& wanted, bool input, bool output) {
    auto& ctx = dnnl_context();
    user = memory(plain, ctx.engine, DNNL_MEMORY_NONE);
    reordered = wanted != plain;
    if (!reordered) {
      blocked = user;
      return;
    }
    blocked = memory(wanted, ctx.engine);
    if (input) to_blocked.emplace(user, blocked);
    if (output) to_user.emplace(blocked, user);
  }
  // The primitive's view of `data`, reordered in when an input.
  const memory& in(const float* data) {
    user.set_data_handle(const_cast<float*>(data));
    if (to_blocked) to_blocked->execute(dnnl_context().stream, user, blocked);
    return blocked;
  }
  void bind(float* data) { user.set_data_handle(data); }
  void out() {
    if (to_user) to_user->execute(dnnl_context().stream, blocked, user);
  }
};

struct Forward {
  dnnl::convolution_forward primitive;
  Operand x, w, y;
  memory bias;
  Args args;
};

struct BackwardData {
  dnnl::convolution_backward_data primitive;
  Operand dy, w, dx;
  Args args;
  // The same arguments with dy taken from the weights pass's blocked copy, when both
  // passes want dy in the same layout: one reorder of dy per backward instead of two.
  std::optional<Args> args_with_weights_dy;
};

// dW and dbias go to plain scratch buffers, then are added to the caller's (which
// accumulate over micro-batches).
struct BackwardWeights {
  dnnl::convolution_backward_weights primitive;
  Operand x, dy, dw;
  std::vector<float> dw_sum, db_sum;
  memory db;
  Args args;
};

// *_any are the float32 outputs (y, dx, dW); *_in the inputs (x, W, dy), bfloat16 for
// Precision::kBF16 and float32 otherwise.
struct Plan {
  memory::desc x_plain, w_plain, y_plain, b_plain;
  memory::desc x_any, w_any, y_any;
  memory::desc x_in, w_in, y_in;
  memory::dims strides, pads;
  std::optional<dnnl::convolution_forward::primitive_desc> hint;  // forward_training with bias
  std::optional<Forward> forward[2];                              // [has bias]
  std::optional<BackwardData> backward_data;
  std::optional<BackwardWeights> backward_weights;
};

// Primitives depend on the thread count they were made for (their work split).
using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, bool>;

Plan& plan(const ConvShape& s, Precision precision) {
  static std::map<Key, std::unique_ptr<Plan>> plans;
  const bool bf16 = precision == Precision::kBF16;
  const Key key{s.n, s.c, s.h, s.w, s.oc, s.kh, s.kw, s.stride, s.pad, omp_get_max_threads(), bf16};
  auto& slot = plans[key];
  if (slot) return *slot;
  auto p = std::make_unique<Plan>();
  const memory::dims x{dim(s.n), dim(s.c), dim(s.h), dim(s.w)}, w{dim(s.oc), dim(s.c), dim(s.kh), dim(s.kw)},
      y{dim(s.n), dim(s.oc), dim(s.oh), dim(s.ow)}, b{dim(s.oc)};
  p->x_plain = memory::desc(x, dt::f32, tag::nchw);
  p->w_plain = memory::desc(w, dt::f32, tag::oihw);
  p->y_plain = memory::desc(y, dt::f32, tag::nchw);
  p->b_plain = memory::desc(b, dt::f32, tag::x);
  p->x_any = memory::desc(x, dt::f32, tag::any);
  p->w_any = memory::desc(w, dt::f32, tag::any);
  p->y_any = memory::desc(y, dt::f32, tag::any);
  const dt in = bf16 ? dt::bf16 : dt::f32;
  p->x_in = memory::desc(x, in, tag::any);
  p->w_in = memory::desc(w, in, tag::any);
  p->y_in = memory::desc(y, in, tag::any);
  p->strides = {dim(s.stride), dim(s.stride)};
  p->pads = {dim(s.pad), dim(s.pad)};
  slot = std::move(p);
  return *slot;
}

// The direct algorithm: convolution_auto may pick Winograd, whose rounding differs more.
dnnl::convolution_forward::primitive_desc forward_pd(const Plan& p, bool bias) {
  const auto desc = dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                                    dnnl::algorithm::convolution_direct, p.x_in, p.w_in,
                                                    bias ? p.b_plain : memory::desc(), p.y_any, p.strides,
                                                    p.pads, p.pads);
  return {desc, dnnl_context().engine};
}

const dnnl::convolution_forward::primitive_desc& hint(Plan& p) {
  if (!p.hint) p.hint = forward_pd(p, true);
  return *p.hint;
}

Forward& forward(Plan& p, bool bias) {
  auto& f = p.forward[bias ? 1 : 0];
  if (f) return *f;
  const auto pd = bias ? hint(p) : forward_pd(p, false);
  f.emplace(Forward{dnnl::convolution_forward(pd), Operand(p.x_plain, pd.src_desc(), true, false),
                    Operand(p.w_plain, pd.weights_desc(), true, false),
                    Operand(p.y_plain, pd.dst_desc(), false, true), memory(), {}});
  f->args = {{DNNL_ARG_SRC, f->x.blocked}, {DNNL_ARG_WEIGHTS, f->w.blocked}, {DNNL_ARG_DST, f->y.blocked}};
  if (bias) {
    f->bias = memory(p.b_plain, dnnl_context().engine, DNNL_MEMORY_NONE);
    f->args.emplace(DNNL_ARG_BIAS, f->bias);
  }
  return *f;
}

BackwardData& backward_data(Plan& p) {
  auto& b = p.backward_data;
  if (b) return *b;
  const auto desc = dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, p.x_any, p.w_in,
                                                          p.y_in, p.strides, p.pads, p.pads);
  const dnnl::convolution_backward_data::primitive_desc pd(desc, dnnl_context().engine, hint(p));
  b.emplace(BackwardData{dnnl::convolution_backward_data(pd), Operand(p.y_plain, pd.diff_dst_desc(), true, false),
                         Operand(p.w_plain, pd.weights_desc(), true, false),
                         Operand(p.x_plain, pd.diff_src_desc(), false, true), {}});
  b->args = {{DNNL_ARG_DIFF_DST, b->dy.blocked}, {DNNL_ARG_WEIGHTS, b->w.blocked},
             {DNNL_ARG_DIFF_SRC, b->dx.blocked}};
  return *b;
}

BackwardWeights& backward_weights(Plan& p, const ConvShape& s) {
  auto& b = p.backward_weights;
  if (b) return *b;
  const auto desc = dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, p.x_in,
                                                             p.w_any, p.b_plain, p.y_in, p.strides, p.pads,
                                                             p.pads);
  const dnnl::convolution_backward_weights::primitive_desc pd(desc, dnnl_context().engine, hint(p));
  b.emplace(BackwardWeights{dnnl::convolution_backward_weights(pd), Operand(p.x_plain, pd.src_desc(), true, false),
                            Operand(p.y_plain, pd.diff_dst_desc(), true, false),
                            Operand(p.w_plain, pd.diff_weights_desc(), false, true),
                            std::vector<float>(static_cast<size_t>(s.oc * s.c * s.kh * s.kw)),
                            std::vector<float>(static_cast<size_t>(s.oc)), memory(), {}});
  b->dw.bind(b->dw_sum.data());
  b->db = memory(p.b_plain, dnnl_context().engine, b->db_sum.data());
  b->args = {{DNNL_ARG_SRC, b->x.blocked}, {DNNL_ARG_DIFF_DST, b->dy.blocked},
             {DNNL_ARG_DIFF_WEIGHTS, b->dw.blocked}, {DNNL_ARG_DIFF_BIAS, b->db}};
  return *b;
}

// oneDNN reports failures as dnnl::error: rethrown with the shape, as mirrored's errors.
template <typename F>
void guarded(const char* what, const ConvShape& s, F&& body) {
  try {
    body();
  } catch (const dnnl::error& e) {
    MIRRORED_CHECK(false, what, " failed for x [", s.n, ", ", s.c, ", ", s.h, ", ", s.w, "], weight [", s.oc, ", ",
                   s.c, ", ", s.kh, ", ", s.kw, "], stride ", s.stride, ", pad ", s.pad, ": ", e.what(),
                   " (status ", static_cast<int>(e.status), ")");
  }
}

}  // namespace

bool onednn_built() { return true; }

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return str_cat(v->major, ".", v->minor, ".", v->patch,
                 v->cpu_runtime == DNNL_RUNTIME_OMP ? " (OpenMP)" : "");
}

void onednn_conv2d_forward(const float* x, const float* weight, const float* bias, const ConvShape& s, float* y,
                           Precision precision) {
  guarded("oneDNN convolution forward", s, [&] {
    Forward& f = forward(plan(s, precision), bias != nullptr);
    auto& stream = dnnl_context().stream;
    f.x.in(x);
    f.w.in(weight);
    if (bias) f.bias.set_data_handle(const_cast<float*>(bias));
    f.y.bind(y);
    f.primitive.execute(stream, f.args);
    f.y.out();
    stream.wait();
  });
}

void onednn_conv2d_backward(const float* x, const float* weight, const float* dy, const ConvShape& s, float* dx,
                            float* dweight, float* dbias, Precision precision) {
  guarded("oneDNN convolution backward", s, [&] {
    Plan& p = plan(s, precision);
    auto& stream = dnnl_context().stream;
    if (dweight || dbias) {
      BackwardWeights& b = backward_weights(p, s);
      b.x.in(x);
      b.dy.in(dy);
      b.primitive.execute(stream, b.args);
      b.dw.out();
      stream.wait();
      if (dweight)
        for (size_t i = 0; i < b.dw_sum.size(); ++i) dweight[i] += b.dw_sum[i];
      if (dbias)
        for (size_t i = 0; i < b.db_sum.size(); ++i) dbias[i] += b.db_sum[i];
    }
    if (dx) {
      BackwardData& b = backward_data(p);
      const Args* args = &b.args;
      if ((dweight || dbias) && b.dy.reordered) {
        BackwardWeights& w = *p.backward_weights;
        if (!b.args_with_weights_dy && w.dy.reordered && w.dy.blocked.get_desc() == b.dy.blocked.get_desc()) {
          b.args_with_weights_dy = b.args;
          (*b.args_with_weights_dy)[DNNL_ARG_DIFF_DST] = w.dy.blocked;
        }
        if (b.args_with_weights_dy) args = &*b.args_with_weights_dy;  // dy is already there
      }
      if (args == &b.args) b.dy.in(dy);
      b.w.in(weight);
      b.dx.bind(dx);
      b.primitive.execute(stream, *args);
      b.dx.out();
      stream.wait();
    }
  });
}

}  // namespace mirrored::kernels::cpu

#endif  // MIRRORED_WITH_ONEDNN
