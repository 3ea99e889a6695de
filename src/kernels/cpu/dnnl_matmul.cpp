// Matrix products through oneDNN's matmul, compiled only with MIRRORED_WITH_ONEDNN: float32
// (gemm_backends.h) and bfloat16 (bf16_backends.h).
//
// A transposed operand is described by strides, not copied. float32 operands are read in
// place; for bfloat16 the float32 inputs are rounded (core/bf16.h, the same bits as every
// other bf16 path; inputs rounded before are read in place) into bfloat16 buffers that keep the callers' row strides, and oneDNN
// multiplies them with float32 accumulation into the float32 output. alpha is an output
// scale and beta a sum post-op.
//
// Primitives are made on a shape's first call and kept (key: extents, transposes, strides,
// alpha, beta, thread count). Not locked: kernels run on the main thread only (dnnl_conv.cpp).
#ifdef MIRRORED_WITH_ONEDNN

#include <omp.h>

#include <dnnl.hpp>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>

#include "bf16_backends.h"
#include "dnnl_context.h"
#include "gemm_backends.h"
#include "mirrored/core/error.h"

namespace mirrored::kernels::cpu {
namespace {

using dnnl::memory;
using dt = memory::data_type;

struct Product {
  dnnl::matmul primitive;
  memory a, b, c;
  std::unordered_map<int, memory> args;
};

// Extents, transposes, strides, alpha, beta, thread count and whether the inputs are bf16.
using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, int64_t, int64_t, int64_t, float, float, int, bool>;

// A row-major [rows, cols] operand with row stride ld, seen as op(x) [op_rows, op_cols].
memory::desc operand(int64_t op_rows, int64_t op_cols, bool transposed, int64_t ld, dt type) {
  const memory::dims dims{op_rows, op_cols};
  const memory::dims strides = transposed ? memory::dims{1, ld} : memory::dims{ld, 1};
  return memory::desc(dims, type, strides);
}

Product& product(const Key& key) {
  static std::map<Key, std::unique_ptr<Product>> products;
  auto& slot = products[key];
  if (slot) return *slot;
  const auto [m, n, k, ta, tb, lda, ldb, ldc, alpha, beta, threads, bf16] = key;
  (void)threads;
  const dt input = bf16 ? dt::bf16 : dt::f32;
  const auto a_md = operand(m, k, ta, lda, input);
  const auto b_md = operand(k, n, tb, ldb, input);
  const auto c_md = operand(m, n, false, ldc, dt::f32);
  dnnl::primitive_attr attr;
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (beta != 0.0f) {
    dnnl::post_ops ops;
    ops.append_sum(beta);
    attr.set_post_ops(ops);
  }
  auto& ctx = dnnl_context();
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, ctx.engine);
  auto p = std::make_unique<Product>(Product{dnnl::matmul(pd), memory(a_md, ctx.engine, DNNL_MEMORY_NONE),
                                             memory(b_md, ctx.engine, DNNL_MEMORY_NONE),
                                             memory(c_md, ctx.engine, DNNL_MEMORY_NONE),
                                             {}});
  p->args = {{DNNL_ARG_SRC, p->a}, {DNNL_ARG_WEIGHTS, p->b}, {DNNL_ARG_DST, p->c}};
  slot = std::move(p);
  return *slot;
}

// The product of `key` on the operands `bind` sets, run to completion; a oneDNN error
// becomes a check failure naming the product.
template <typename Bind>
void multiply(const Key& key, Bind&& bind) {
  [[maybe_unused]] const auto [m, n, k, ta, tb, lda, ldb, ldc, alpha, beta, threads, bf16] = key;
  try {
    Product& p = product(key);
    bind(p);
    p.primitive.execute(dnnl_context().stream, p.args);
    dnnl_context().stream.wait();
  } catch (const dnnl::error& e) {
    MIRRORED_CHECK(false, "oneDNN ", bf16 ? "bf16" : "float32", " matmul failed for m ", m, ", n ", n, ", k ", k,
                   ", transposes ", ta, tb, ", lda ", lda, ", ldb ", ldb, ", ldc ", ldc, ": ", e.what(), " (status ",
                   static_cast<int>(e.status), ")");
  }
}

}  // namespace

void onednn_gemm_bf16(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
                      Bf16Operand a, int64_t lda, Bf16Operand b, int64_t ldb, float beta, float* c,
                      int64_t ldc) {
  const Key key{m, n, k, transpose_a, transpose_b, lda, ldb, ldc, alpha, beta, omp_get_max_threads(), true};
  multiply(key, [&](Product& p) {
    // oneDNN only reads its inputs; its handle type is not const.
    p.a.set_data_handle(const_cast<uint16_t*>(rounded_operand(0, a, transpose_a ? k : m, transpose_a ? m : k, lda)));
    p.b.set_data_handle(const_cast<uint16_t*>(rounded_operand(1, b, transpose_b ? n : k, transpose_b ? k : n, ldb)));
    p.c.set_data_handle(c);
  });
}

void onednn_gemm_f32(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
                     const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const Key key{m, n, k, transpose_a, transpose_b, lda, ldb, ldc, alpha, beta, omp_get_max_threads(), false};
  multiply(key, [&](Product& p) {
    p.a.set_data_handle(const_cast<float*>(a));  // read only, as above
    p.b.set_data_handle(const_cast<float*>(b));
    p.c.set_data_handle(c);
  });
}

}  // namespace mirrored::kernels::cpu

#endif  // MIRRORED_WITH_ONEDNN
