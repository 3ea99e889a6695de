#pragma once
// The model a ModelSpec (library_options.h) names, for samples of `sample_shape` and
// `num_classes` classes, not yet built. Throws InputError(kUsage) when the architecture
// does not fit the data (a cnn on non-image samples, convolutions that leave no pixels).
#include <string>

#include "mirrored/config/library_options.h"
#include "mirrored/core/tensor.h"
#include "mirrored/nn/model.h"

namespace mirrored::config {

// What a model is built for: one sample as it takes it ({C, H, W} images, {context}
// tokens) and the number of classes its outputs score (labels, or the vocabulary).
struct ModelInputs {
  Shape sample_shape;
  int num_classes = 0;
};

// The model with spec.precision set on it.
nn::Model build_model(const ModelSpec& spec, const Shape& sample_shape, int num_classes);

// What decides whether precision = bf16 pays on a CPU (kernels::cpu_native_bf16,
// cpu_bf16_runs_native, cpu_bf16_method).
struct CpuBf16Facts {
  bool native_cpu = false;   // AVX512-BF16 or AMX-BF16 (cpuid)
  bool runs_native = false;  // the products run on them (oneDNN or MKL)
  std::string method;        // how the products run
};

// The start-up warning for spec on `device`: one line that names the missing CPU feature
// (or the method that leaves it unused) and the consequence, "" where bf16 runs natively
// (GPUs, or a native path on the CPU) or precision is fp32.
std::string slow_precision_warning(const ModelSpec& spec, Device device, const CpuBf16Facts& cpu);

// That warning, from this process's facts, on rank 0 only.
void warn_about_slow_precision(const ModelSpec& spec, Device device, bool chief);

}  // namespace mirrored::config
