#include "mirrored/nn/product_operands.h"

#include "mirrored/kernels/kernels.h"

namespace mirrored::nn {

void ProductOperands::forward(const Tensor& x, const Tensor& weight, Precision precision) {
  // On a GPU gemm takes float32 operands and rounds them on the device, beside cuBLAS
  // (kernels/cuda/gemm.cpp); unmeasured there, so unchanged.
  rounded_ = precision == Precision::kBF16 && x.device().is_cpu();
  if (!rounded_) return;
  kernels::round_to_bf16(x, x_bf16_);
  kernels::round_to_bf16(weight, weight_bf16_);
}

const Tensor& ProductOperands::dy(const Tensor& dy) {
  if (!rounded_ || dy.dtype() == DType::kBF16) return dy;
  kernels::round_to_bf16(dy, dy_bf16_);
  return dy_bf16_;
}

}  // namespace mirrored::nn
