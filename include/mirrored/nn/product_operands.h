#pragma once
// The operands of a layer's three matrix products, y = x W^T, dW += dy^T x and dx = dy W,
// as they are passed to kernels::gemm. Each operand takes part in two of the products; in
// bf16 on the CPU each is rounded to bfloat16 once (the input and the weight as forward
// runs, the output gradient as backward starts) instead of once per product, which was a
// tenth of the gpt recipe's bf16 step. The products' bits are the same either way. In fp32,
// and on a GPU, the float32 tensors themselves.
#include "mirrored/core/precision.h"
#include "mirrored/core/tensor.h"

namespace mirrored::nn {

class ProductOperands {
 public:
  // In forward, before its product: the input as [rows, in] and the weight [out, in]. An
  // input already in bfloat16 (rounded by the layer that made it) needs bf16 on the CPU.
  void forward(const Tensor& x, const Tensor& weight, Precision precision);
  // The layer's input and weight, given again, as the products take them.
  const Tensor& x(const Tensor& x) const { return rounded_ && x.dtype() != DType::kBF16 ? x_bf16_ : x; }
  const Tensor& weight(const Tensor& weight) const { return rounded_ ? weight_bf16_ : weight; }
  // Whether the products take bfloat16 operands (bf16 on the CPU), as forward decided.
  bool rounded() const { return rounded_; }
  // In backward, before its products: the output gradient as [rows, out], as they take it
  // (a gradient already in bfloat16, rounded as it was formed, is taken as it is).
  const Tensor& dy(const Tensor& dy);

 private:
  bool rounded_ = false;
  Tensor x_bf16_, weight_bf16_, dy_bf16_;  // kBF16, reshaped as the shapes ask
};

}  // namespace mirrored::nn
