#include "mirrored/nn/product_operands.h"

#include "mirrored/kernels/kernels.h"

namespace mirrored::nn {

void ProductOperands::forward(const Tensor& x, const Tensor& weight, Precision precision) {
  // On a GPU gemm takes float32 operands and rounds them on the device, beside cuBLAS
  // (kernels/cuda/gemm.cpp); unmeasured there, so unchanged.
  rounded_ = precision == Precision::kBF16 && x.device().is_cpu();
  MIRRORED_CHECK(rounded_ || x.dtype() == DType::kF32, "a layer's bfloat16 input needs bf16 products on the CPU (",
                 precision_name(precision), " on ", x.device().str(), ")");
  if (!rounded_) return;
  if (x.dtype() != DType::kBF16) kernels::round_to_bf16(x, x_bf16_);
  kernels::round_to_bf16(weight, weight_bf16_);
}

const Tensor& ProductOperands::dy(const Tensor& dy) {
  if (!rounded_ || dy.dtype() == DType::kBF16) return dy;
  kernels::round_to_bf16(dy, dy_bf16_);
  return dy_bf16_;
}

}  // namespace mirrored::nn
