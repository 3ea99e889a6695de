// Checked entry points of the dense ops: matrix product, bias, softmax cross-entropy.
#include "cpu/cpu_kernels.h"
#include "dispatch_checks.h"

namespace mirrored::kernels {
using namespace checks;

namespace {
// An operand of a bf16 product: float32 values to round, or bfloat16 ones rounded before.
cpu::Bf16Operand bf16_operand(const char* which, const Tensor& t) {
  if (t.dtype() == DType::kBF16) return t.data<uint16_t>();
  MIRRORED_CHECK(t.dtype() == DType::kF32, "gemm: ", which, " holds ", dtype_name(t.dtype()),
                 ", expected float32 or bfloat16");
  return t.data<float>();
}
}  // namespace

void gemm(bool transpose_a, bool transpose_b, float alpha, const Tensor& a, const Tensor& b, float beta,
          Tensor& c, Precision precision) {
  const bool cuda = on_cuda("gemm", {&a, &b, &c});
  const bool rounded_operands = a.dtype() == DType::kBF16 || b.dtype() == DType::kBF16;
  if (rounded_operands) {
    MIRRORED_CHECK(precision == Precision::kBF16 && !cuda, "gemm: bfloat16 operands need precision bf16 on the CPU (",
                   precision_name(precision), " on ", c.device().str(), ")");
    require_f32("gemm", {&c});
  } else {
    require_f32("gemm", {&a, &b, &c});
  }
  require_matrix("gemm", a);
  require_matrix("gemm", b);
  require_matrix("gemm", c);
  const int64_t m = transpose_a ? a.dim(1) : a.dim(0);
  const int64_t k = transpose_a ? a.dim(0) : a.dim(1);
  const int64_t kb = transpose_b ? b.dim(1) : b.dim(0);
  const int64_t n = transpose_b ? b.dim(0) : b.dim(1);
  MIRRORED_CHECK(k == kb && c.dim(0) == m && c.dim(1) == n, "gemm: op(a) ", m, "x", k, ", op(b) ", kb,
                 "x", n, ", c ", shape_str(c.shape()));
  if (cuda) MIRRORED_ON_CUDA(a, gemm, transpose_a, transpose_b, m, n, k, alpha, a.data<float>(), a.dim(1),
                                b.data<float>(), b.dim(1), beta, c.data<float>(), c.dim(1), precision);
  if (rounded_operands) {
    cpu::gemm_bf16(transpose_a, transpose_b, m, n, k, alpha, bf16_operand("a", a), a.dim(1), bf16_operand("b", b),
                   b.dim(1), beta, c.data<float>(), c.dim(1));
    return;
  }
  cpu::gemm(transpose_a, transpose_b, m, n, k, alpha, a.data<float>(), a.dim(1), b.data<float>(),
            b.dim(1), beta, c.data<float>(), c.dim(1), precision);
}

void round_to_bf16(const Tensor& x, Tensor& out) {
  require_f32("round_to_bf16", {&x});
  ensure_shape(out, x.shape(), DType::kBF16, x.device());
  to_bf16(x.data<float>(), out.data<uint16_t>(), x.numel(), x.device());
}

void add_bias(Tensor& y, const Tensor& bias) {
  const bool cuda = on_cuda("add_bias", {&y, &bias});
  require_f32("add_bias", {&y, &bias});
  require_matrix("add_bias", y);
  MIRRORED_CHECK(bias.rank() == 1 && bias.dim(0) == y.dim(1), "add_bias: bias ",
                 shape_str(bias.shape()), " for y ", shape_str(y.shape()));
  if (cuda) MIRRORED_ON_CUDA(y, add_bias, y.data<float>(), bias.data<float>(), y.dim(0), y.dim(1));
  cpu::add_bias(y.data<float>(), bias.data<float>(), y.dim(0), y.dim(1));
}

void accumulate_bias_grad(const Tensor& dy, Tensor& dbias) {
  const bool cuda = on_cuda("accumulate_bias_grad", {&dy, &dbias});
  require_f32("accumulate_bias_grad", {&dy, &dbias});
  require_matrix("accumulate_bias_grad", dy);
  MIRRORED_CHECK(dbias.rank() == 1 && dbias.dim(0) == dy.dim(1), "accumulate_bias_grad: dbias ",
                 shape_str(dbias.shape()), " for dy ", shape_str(dy.shape()));
  if (cuda) MIRRORED_ON_CUDA(dy, accumulate_bias_grad, dy.data<float>(), dbias.data<float>(), dy.dim(0), dy.dim(1));
  cpu::accumulate_bias_grad(dy.data<float>(), dbias.data<float>(), dy.dim(0), dy.dim(1));
}

CrossEntropyResult softmax_cross_entropy(const Tensor& logits, const Tensor& labels, Tensor* dlogits,
                                         float grad_scale) {
  const char* op = "softmax_cross_entropy";
  const bool cuda = dlogits ? on_cuda(op, {&logits, &labels, dlogits}) : on_cuda(op, {&logits, &labels});
  require_f32(op, {&logits});
  require_matrix(op, logits);
  MIRRORED_CHECK(logits.dim(1) > 0, op, ": no classes in logits ", shape_str(logits.shape()));
  MIRRORED_CHECK(labels.dtype() == DType::kI32, op, ": labels must be int32, got ",
                 dtype_name(labels.dtype()));
  MIRRORED_CHECK(labels.rank() == 1 && labels.dim(0) == logits.dim(0), op, ": labels ",
                 shape_str(labels.shape()), " for logits ", shape_str(logits.shape()));
  if (dlogits) {
    require_f32(op, {dlogits});
    require_same_shape(op, logits, *dlogits);
  }
  if (cuda)
    MIRRORED_ON_CUDA(logits, softmax_cross_entropy, logits.data<float>(), labels.data<int32_t>(), logits.dim(0),
                     logits.dim(1), dlogits ? dlogits->data<float>() : nullptr, grad_scale);
  return cpu::softmax_cross_entropy(logits.data<float>(), labels.data<int32_t>(), logits.dim(0),
                                    logits.dim(1), dlogits ? dlogits->data<float>() : nullptr,
                                    grad_scale);
}

}  // namespace mirrored::kernels
