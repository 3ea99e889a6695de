// The checked entry points of the transformer ops (kernels.h, "Transformer"): shapes,
// dtypes and devices are enforced here, then the CPU or CUDA kernel runs.
#include <initializer_list>

#include "cpu/cpu_kernels.h"
#include "mirrored/kernels/kernels.h"

#ifdef MIRRORED_WITH_CUDA
#include "cuda/cuda_kernels.h"
#endif

namespace mirrored::kernels {
namespace {

// Every tensor exists and all live on one device; true when it is a GPU.
bool transformer_on_cuda(const char* op, std::initializer_list<const Tensor*> tensors) {
  const Tensor& first = **tensors.begin();
  for (const Tensor* t : tensors) {
    MIRRORED_CHECK(t->defined(), op, ": undefined tensor");
    MIRRORED_CHECK(t->device() == first.device(), op, ": tensors on ", first.device().str(), " and ",
                   t->device().str());
  }
#ifndef MIRRORED_WITH_CUDA
  MIRRORED_CHECK(!first.device().is_cuda(), op, ": this build of mirrored has no CUDA support");
#endif
  return first.device().is_cuda();
}

#ifdef MIRRORED_WITH_CUDA
#define MIRRORED_TRANSFORMER_CUDA(tensor, fn, ...) \
  return cuda::fn(cuda::context((tensor).device().index), __VA_ARGS__)
#else
#define MIRRORED_TRANSFORMER_CUDA(tensor, fn, ...) return
#endif

void require_floats(const char* op, std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors)
    MIRRORED_CHECK(t->dtype() == DType::kF32, op, ": expected float32, got ", dtype_name(t->dtype()));
}

// An output that may be bfloat16 on the CPU (rounded as formed, for bf16 products that take
// it as their operand); true when it is.
bool require_float_or_cpu_bf16(const char* op, const char* what, const Tensor& t, bool cuda) {
  const bool rounded = t.dtype() == DType::kBF16;
  MIRRORED_CHECK(t.dtype() == DType::kF32 || (rounded && !cuda), op, ": ", what, " holds ", dtype_name(t.dtype()),
                 " on ", t.device().str(), ", expected float32 (or bfloat16 on the CPU)");
  return rounded;
}

void require_shape(const char* op, const char* what, const Tensor& t, const Shape& expected) {
  MIRRORED_CHECK(t.shape() == expected, op, ": ", what, " is ", shape_str(t.shape()), ", expected ",
                 shape_str(expected));
}

// The channel count of x [..., C] and its number of rows (the product of the rest).
struct Rows {
  int64_t rows = 0, c = 0;
};
Rows rows_of(const char* op, const Tensor& x) {
  MIRRORED_CHECK(x.rank() >= 1, op, ": expected [..., C], got a scalar");
  Rows r;
  r.c = x.dim(x.rank() - 1);
  MIRRORED_CHECK(r.c > 0, op, ": no channels in ", shape_str(x.shape()));
  r.rows = x.numel() / r.c;
  return r;
}

// The embedding operands: tokens int32 [B, T], wte [V, C], wpe [P, C], T <= P.
struct EmbeddingShape {
  int64_t batch = 0, tokens = 0, vocab = 0, c = 0;
};
EmbeddingShape embedding_shape(const char* op, const Tensor& tokens, const Tensor& wte, const Tensor& wpe,
                               const Tensor& activations) {
  MIRRORED_CHECK(tokens.dtype() == DType::kI32, op, ": token ids must be int32, got ", dtype_name(tokens.dtype()));
  MIRRORED_CHECK(tokens.rank() == 2, op, ": token ids must be [B, T], got ", shape_str(tokens.shape()));
  MIRRORED_CHECK(wte.rank() == 2 && wpe.rank() == 2 && wte.dim(1) == wpe.dim(1), op, ": wte ",
                 shape_str(wte.shape()), " and wpe ", shape_str(wpe.shape()), " must be [V, C] and [P, C]");
  EmbeddingShape s{tokens.dim(0), tokens.dim(1), wte.dim(0), wte.dim(1)};
  MIRRORED_CHECK(s.tokens <= wpe.dim(0), op, ": ", s.tokens, " tokens per sequence, but only ", wpe.dim(0),
                 " positions");
  require_floats(op, {&wte, &wpe, &activations});
  require_shape(op, "the activations", activations, {s.batch, s.tokens, s.c});
  return s;
}

struct AttentionShape {
  int64_t b = 0, t = 0, c = 0;
};
AttentionShape attention_shape(const char* op, const Tensor& qkv, int64_t heads) {
  MIRRORED_CHECK(qkv.rank() == 3 && qkv.dim(2) % 3 == 0, op, ": qkv must be [B, T, 3C], got ",
                 shape_str(qkv.shape()));
  AttentionShape s{qkv.dim(0), qkv.dim(1), qkv.dim(2) / 3};
  MIRRORED_CHECK(heads > 0 && s.c % heads == 0, op, ": ", heads, " heads do not divide ", s.c, " channels");
  return s;
}

// The fused kernels' head sizes, refused alike on every device (kernels.h).
AttentionShape fused_attention_shape(const char* op, const Tensor& qkv, int64_t heads) {
  const AttentionShape s = attention_shape(op, qkv, heads);
  MIRRORED_CHECK(s.c / heads <= kMaxAttentionHeadSize, op, ": head size ", s.c / heads, " (", s.c, " channels / ",
                 heads, " heads) is above ", kMaxAttentionHeadSize, ", the largest the fused attention supports on any "
                 "device");
  return s;
}

}  // namespace

void embedding_forward(const Tensor& tokens, const Tensor& wte, const Tensor& wpe, Tensor& out) {
  const char* op = "embedding_forward";
  const bool cuda = transformer_on_cuda(op, {&tokens, &wte, &wpe, &out});
  const EmbeddingShape s = embedding_shape(op, tokens, wte, wpe, out);
  if (cuda)
    MIRRORED_TRANSFORMER_CUDA(out, embedding_forward, tokens.data<int32_t>(), wte.data<float>(), wpe.data<float>(),
                              s.batch, s.tokens, s.vocab, s.c, out.data<float>());
  cpu::embedding_forward(tokens.data<int32_t>(), wte.data<float>(), wpe.data<float>(), s.batch, s.tokens, s.vocab,
                         s.c, out.data<float>());
}

void embedding_backward(const Tensor& tokens, const Tensor& dout, Tensor& dwte, Tensor& dwpe) {
  const char* op = "embedding_backward";
  const bool cuda = transformer_on_cuda(op, {&tokens, &dout, &dwte, &dwpe});
  const EmbeddingShape s = embedding_shape(op, tokens, dwte, dwpe, dout);
  if (cuda)
    MIRRORED_TRANSFORMER_CUDA(dout, embedding_backward, tokens.data<int32_t>(), dout.data<float>(), s.batch, s.tokens,
                              s.vocab, s.c, dwte.data<float>(), dwpe.data<float>());
  cpu::embedding_backward(tokens.data<int32_t>(), dout.data<float>(), s.batch, s.tokens, s.vocab, s.c,
                          dwte.data<float>(), dwpe.data<float>());
}

void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& y,
                        Tensor& mean, Tensor& rstd) {
  const char* op = "layer_norm_forward";
  const bool cuda = transformer_on_cuda(op, {&x, &gamma, &beta, &y, &mean, &rstd});
  require_floats(op, {&x, &gamma, &beta, &y, &mean, &rstd});
  const Rows r = rows_of(op, x);
  require_shape(op, "gamma", gamma, {r.c});
  require_shape(op, "beta", beta, {r.c});
  require_shape(op, "y", y, x.shape());
  require_shape(op, "mean", mean, {r.rows});
  require_shape(op, "rstd", rstd, {r.rows});
  MIRRORED_CHECK(eps > 0.0f, op, ": eps ", eps, " must be positive");
  if (cuda)
    MIRRORED_TRANSFORMER_CUDA(x, layer_norm_forward, x.data<float>(), gamma.data<float>(), beta.data<float>(), eps,
                              r.rows, r.c, y.data<float>(), mean.data<float>(), rstd.data<float>());
  cpu::layer_norm_forward(x.data<float>(), gamma.data<float>(), beta.data<float>(), eps, r.rows, r.c, y.data<float>(),
                          mean.data<float>(), rstd.data<float>());
}

void add_layer_norm_forward(const Tensor& a, const Tensor& b, const Tensor& gamma, const Tensor& beta, float eps,
                            Tensor& sum, Tensor& y, Tensor& mean, Tensor& rstd) {
  const char* op = "add_layer_norm_forward";
  const bool cuda = transformer_on_cuda(op, {&a, &b, &gamma, &beta, &sum, &y, &mean, &rstd});
  require_floats(op, {&a, &b, &sum});
  require_shape(op, "b", b, a.shape());
  require_shape(op, "sum", sum, a.shape());
  if (cuda) {
    // Two kernels on a GPU: the fusion saves the CPU a pass over memory.
    add(a, b, sum);
    layer_norm_forward(sum, gamma, beta, eps, y, mean, rstd);
    return;
  }
  require_floats(op, {&gamma, &beta, &y, &mean, &rstd});
  const Rows r = rows_of(op, a);
  require_shape(op, "gamma", gamma, {r.c});
  require_shape(op, "beta", beta, {r.c});
  require_shape(op, "y", y, a.shape());
  require_shape(op, "mean", mean, {r.rows});
  require_shape(op, "rstd", rstd, {r.rows});
  MIRRORED_CHECK(eps > 0.0f, op, ": eps ", eps, " must be positive");
  cpu::add_layer_norm_forward(a.data<float>(), b.data<float>(), gamma.data<float>(), beta.data<float>(), eps, r.rows,
                              r.c, sum.data<float>(), y.data<float>(), mean.data<float>(), rstd.data<float>());
}

namespace {

// layer_norm_backward with dx = dresidual + the layer norm's input gradient (dresidual null:
// the plain backward).
void layer_norm_backward_plus(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                              const Tensor& rstd, const Tensor* dresidual, Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                              Tensor& workspace) {
  const char* op = dresidual ? "layer_norm_backward_add" : "layer_norm_backward";
  const bool cuda = transformer_on_cuda(op, {&x, &dy, &gamma, &mean, &rstd, &dx, &dgamma, &dbeta});
  require_floats(op, {&x, &dy, &gamma, &mean, &rstd, &dx, &dgamma, &dbeta});
  const Rows r = rows_of(op, x);
  require_shape(op, "dy", dy, x.shape());
  require_shape(op, "dx", dx, x.shape());
  require_shape(op, "gamma", gamma, {r.c});
  require_shape(op, "dgamma", dgamma, {r.c});
  require_shape(op, "dbeta", dbeta, {r.c});
  require_shape(op, "mean", mean, {r.rows});
  require_shape(op, "rstd", rstd, {r.rows});
  if (dresidual) {
    MIRRORED_CHECK(dresidual->device() == x.device(), op, ": dresidual on ", dresidual->device().str(),
                   ", x on ", x.device().str());
    require_floats(op, {dresidual});
    require_shape(op, "dresidual", *dresidual, x.shape());
  }
#ifdef MIRRORED_WITH_CUDA
  if (cuda) {
    ensure_shape(workspace, {cuda::layer_norm_backward_workspace_floats(r.rows, r.c)}, DType::kF32, x.device());
    cuda::layer_norm_backward(cuda::context(x.device().index), x.data<float>(), dy.data<float>(), gamma.data<float>(),
                              mean.data<float>(), rstd.data<float>(), r.rows, r.c, dx.data<float>(),
                              dgamma.data<float>(), dbeta.data<float>(), workspace.data<float>());
    if (dresidual) add(*dresidual, dx, dx);
    return;
  }
#else
  (void)cuda;
  (void)workspace;
#endif
  cpu::layer_norm_backward(x.data<float>(), dy.data<float>(), gamma.data<float>(), mean.data<float>(),
                           rstd.data<float>(), dresidual ? dresidual->data<float>() : nullptr, r.rows, r.c,
                           dx.data<float>(), dgamma.data<float>(), dbeta.data<float>());
}

}  // namespace

void layer_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                         const Tensor& rstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta, Tensor& workspace) {
  layer_norm_backward_plus(x, dy, gamma, mean, rstd, nullptr, dx, dgamma, dbeta, workspace);
}

void layer_norm_backward_add(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                             const Tensor& rstd, const Tensor& dresidual, Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                             Tensor& workspace) {
  layer_norm_backward_plus(x, dy, gamma, mean, rstd, &dresidual, dx, dgamma, dbeta, workspace);
}

void gelu_forward(const Tensor& x, Tensor& y) {
  const char* op = "gelu_forward";
  const bool cuda = transformer_on_cuda(op, {&x, &y});
  require_floats(op, {&x, &y});
  require_shape(op, "y", y, x.shape());
  if (cuda) MIRRORED_TRANSFORMER_CUDA(x, gelu_forward, x.data<float>(), y.data<float>(), x.numel());
  cpu::gelu_forward(x.data<float>(), y.data<float>(), x.numel());
}

void gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) {
  const char* op = "gelu_backward";
  const bool cuda = transformer_on_cuda(op, {&x, &dy, &dx});
  require_floats(op, {&x, &dy, &dx});
  require_shape(op, "dy", dy, x.shape());
  require_shape(op, "dx", dx, x.shape());
  if (cuda) MIRRORED_TRANSFORMER_CUDA(x, gelu_backward, x.data<float>(), dy.data<float>(), dx.data<float>(), x.numel());
  cpu::gelu_backward(x.data<float>(), dy.data<float>(), dx.data<float>(), x.numel());
}

void bias_gelu_forward(Tensor& h, const Tensor& bias, Tensor& th, Tensor& y) {
  const char* op = "bias_gelu_forward";
  const bool cuda = transformer_on_cuda(op, {&h, &bias, &th, &y});
  require_floats(op, {&h, &bias, &th});
  const bool rounded = require_float_or_cpu_bf16(op, "y", y, cuda);
  MIRRORED_CHECK(h.rank() == 2 && bias.rank() == 1 && bias.dim(0) == h.dim(1), op, ": h ", shape_str(h.shape()),
                 " and bias ", shape_str(bias.shape()), " (expected [rows, cols] and [cols])");
  require_shape(op, "th", th, h.shape());
  require_shape(op, "y", y, h.shape());
  if (cuda) {
    add_bias(h, bias);
    gelu_forward(h, y);
    return;
  }
  if (rounded) {
    cpu::bias_gelu_forward_bf16(h.data<float>(), bias.data<float>(), h.dim(0), h.dim(1), th.data<float>(),
                                y.data<uint16_t>());
    return;
  }
  cpu::bias_gelu_forward(h.data<float>(), bias.data<float>(), h.dim(0), h.dim(1), th.data<float>(), y.data<float>());
}

void bias_gelu_backward(const Tensor& h, const Tensor& th, const Tensor& dy, Tensor& dh, Tensor& dbias) {
  const char* op = "bias_gelu_backward";
  const bool cuda = transformer_on_cuda(op, {&h, &th, &dy, &dh, &dbias});
  require_floats(op, {&h, &th, &dy, &dbias});
  const bool rounded = require_float_or_cpu_bf16(op, "dh", dh, cuda);
  MIRRORED_CHECK(h.rank() == 2 && dbias.rank() == 1 && dbias.dim(0) == h.dim(1), op, ": h ",
                 shape_str(h.shape()), " and dbias ", shape_str(dbias.shape()), " (expected [rows, cols] and [cols])");
  require_shape(op, "th", th, h.shape());
  require_shape(op, "dy", dy, h.shape());
  require_shape(op, "dh", dh, h.shape());
  if (cuda) {
    gelu_backward(h, dy, dh);
    accumulate_bias_grad(dh, dbias);
    return;
  }
  if (rounded) {
    cpu::bias_gelu_backward_bf16(h.data<float>(), th.data<float>(), dy.data<float>(), h.dim(0), h.dim(1),
                                 dh.data<uint16_t>(), dbias.data<float>());
    return;
  }
  cpu::bias_gelu_backward(h.data<float>(), th.data<float>(), dy.data<float>(), h.dim(0), h.dim(1), dh.data<float>(),
                          dbias.data<float>());
}

void attention_forward(const Tensor& qkv, int64_t heads, Tensor& out, Tensor& probs) {
  const char* op = "attention_forward";
  const bool cuda = transformer_on_cuda(op, {&qkv, &out, &probs});
  require_floats(op, {&qkv, &out, &probs});
  const AttentionShape s = attention_shape(op, qkv, heads);
  require_shape(op, "out", out, {s.b, s.t, s.c});
  require_shape(op, "probs", probs, {s.b, heads, s.t, s.t});
  if (cuda)
    MIRRORED_TRANSFORMER_CUDA(qkv, attention_forward, qkv.data<float>(), s.b, s.t, s.c, heads, out.data<float>(),
                              probs.data<float>());
  cpu::attention_forward(qkv.data<float>(), s.b, s.t, s.c, heads, out.data<float>(), probs.data<float>());
}

void attention_backward(const Tensor& qkv, const Tensor& probs, const Tensor& dout, int64_t heads, Tensor& dqkv,
                        Tensor& workspace) {
  const char* op = "attention_backward";
  const bool cuda = transformer_on_cuda(op, {&qkv, &probs, &dout, &dqkv});
  require_floats(op, {&qkv, &probs, &dout, &dqkv});
  const AttentionShape s = attention_shape(op, qkv, heads);
  require_shape(op, "probs", probs, {s.b, heads, s.t, s.t});
  require_shape(op, "dout", dout, {s.b, s.t, s.c});
  require_shape(op, "dqkv", dqkv, qkv.shape());
#ifdef MIRRORED_WITH_CUDA
  if (cuda) {
    ensure_shape(workspace, {cuda::attention_backward_workspace_floats(s.t, heads)}, DType::kF32, qkv.device());
    MIRRORED_TRANSFORMER_CUDA(qkv, attention_backward, qkv.data<float>(), probs.data<float>(), dout.data<float>(),
                              s.b, s.t, s.c, heads, dqkv.data<float>(), workspace.data<float>());
  }
#else
  (void)cuda;
#endif
  ensure_shape(workspace, {s.t, s.t}, DType::kF32, qkv.device());  // one (batch, head) at a time
  cpu::attention_backward(qkv.data<float>(), probs.data<float>(), dout.data<float>(), s.b, s.t, s.c, heads,
                          dqkv.data<float>(), workspace.data<float>());
}

void fused_attention_forward(const Tensor& qkv, int64_t heads, Tensor& out, Tensor& lse) {
  const char* op = "fused_attention_forward";
  const bool cuda = transformer_on_cuda(op, {&qkv, &out, &lse});
  require_floats(op, {&qkv, &out, &lse});
  const AttentionShape s = fused_attention_shape(op, qkv, heads);
  require_shape(op, "out", out, {s.b, s.t, s.c});
  require_shape(op, "lse", lse, {s.b, heads, s.t});
  if (cuda)
    MIRRORED_TRANSFORMER_CUDA(qkv, fused_attention_forward, qkv.data<float>(), s.b, s.t, s.c, heads,
                              out.data<float>(), lse.data<float>());
  cpu::fused_attention_forward(qkv.data<float>(), s.b, s.t, s.c, heads, out.data<float>(), lse.data<float>());
}

void fused_attention_backward(const Tensor& qkv, const Tensor& out, const Tensor& lse, const Tensor& dout,
                              int64_t heads, Tensor& dqkv, Tensor& workspace) {
  const char* op = "fused_attention_backward";
  const bool cuda = transformer_on_cuda(op, {&qkv, &out, &lse, &dout, &dqkv});
  require_floats(op, {&qkv, &out, &lse, &dout, &dqkv});
  const AttentionShape s = fused_attention_shape(op, qkv, heads);
  require_shape(op, "out", out, {s.b, s.t, s.c});
  require_shape(op, "lse", lse, {s.b, heads, s.t});
  require_shape(op, "dout", dout, {s.b, s.t, s.c});
  require_shape(op, "dqkv", dqkv, qkv.shape());
#ifdef MIRRORED_WITH_CUDA
  if (cuda) {
    ensure_shape(workspace, {cuda::fused_attention_backward_workspace_floats(s.b, s.t, heads)}, DType::kF32,
                 qkv.device());
    MIRRORED_TRANSFORMER_CUDA(qkv, fused_attention_backward, qkv.data<float>(), out.data<float>(),
                              lse.data<float>(), dout.data<float>(), s.b, s.t, s.c, heads, dqkv.data<float>(),
                              workspace.data<float>());
  }
#else
  (void)cuda;
  (void)workspace;  // the CPU kernel keeps its scratch per thread
#endif
  cpu::fused_attention_backward(qkv.data<float>(), out.data<float>(), lse.data<float>(), dout.data<float>(), s.b,
                                s.t, s.c, heads, dqkv.data<float>());
}

}  // namespace mirrored::kernels
