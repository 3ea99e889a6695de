#include "mirrored/config/model_factory.h"

#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/builders.h"

namespace mirrored::config {
namespace {

// Each conv (kernel, padding) then a 2x2 pool must leave at least one pixel.
void check_cnn_fits(const nn::CnnSpec& spec, const Shape& sample_shape) {
  int64_t h = sample_shape[1], w = sample_shape[2];
  for (size_t i = 0; i < spec.channels.size(); ++i) {
    h = (h + 2 * spec.padding - spec.kernel + 1) / spec.pool;
    w = (w + 2 * spec.padding - spec.kernel + 1) / spec.pool;
    if (h < 1 || w < 1)
      throw InputError(str_cat("cnn.kernel_size = ", spec.kernel, ", cnn.padding = ", spec.padding, " with ",
                               spec.channels.size(), " conv stages (cnn.channels) leave no pixels of the ",
                               shape_str(sample_shape), " input after stage ", i + 1,
                               ": use fewer stages, a smaller kernel or more padding"),
                       ExitCode::kUsage);
  }
}

nn::Model build_architecture(const ModelSpec& spec, const Shape& sample_shape, int num_classes) {
  if (spec.kind == ModelKind::kMlp) {
    nn::MlpSpec mlp = spec.mlp;
    mlp.num_classes = num_classes;
    return nn::mlp(mlp);
  }
  if (spec.kind == ModelKind::kGpt) {
    nn::GptSpec gpt = spec.gpt;
    gpt.vocab = num_classes;
    if (sample_shape != Shape{gpt.context})
      throw InputError(str_cat("model = gpt with gpt.context = ", gpt.context, " needs token windows [",
                               gpt.context, "]; the data has ", shape_str(sample_shape)),
                       ExitCode::kUsage);
    return nn::gpt(gpt);
  }
  const char* name = spec.kind == ModelKind::kCnn ? "cnn" : "resnet";
  if (sample_shape.size() != 3)
    throw InputError(str_cat("model = ", name, " needs image samples [C, H, W]; the data has ",
                             shape_str(sample_shape)),
                     ExitCode::kUsage);
  if (spec.kind == ModelKind::kCnn) {
    nn::CnnSpec cnn = spec.cnn;
    cnn.num_classes = num_classes;
    check_cnn_fits(cnn, sample_shape);
    return nn::cnn(cnn);
  }
  nn::ResNetSpec resnet = spec.resnet;
  resnet.num_classes = num_classes;
  return nn::resnet(resnet);
}

}  // namespace

nn::Model build_model(const ModelSpec& spec, const Shape& sample_shape, int num_classes) {
  nn::Model model = build_architecture(spec, sample_shape, num_classes);
  model.set_precision(spec.precision);
  return model;
}

std::string slow_precision_warning(const ModelSpec& spec, Device device, const CpuBf16Facts& cpu) {
  if (spec.precision != Precision::kBF16 || !device.is_cpu() || cpu.runs_native) return "";
  // Without bf16 instructions every path rounds the inputs and then multiplies in float32
  // (oneDNN and MKL emulate): the same GEMM as fp32 plus the rounding.
  if (!cpu.native_cpu)
    return str_cat("precision = bf16 on a CPU without AVX512-BF16 or AMX-BF16 (cpuid): no bf16 path here is faster "
                   "than fp32; products run as ", cpu.method,
                   ", expect about 0.9x fp32's speed (0.88x on a 1024-wide mlp, 0.94x on the Shakespeare gpt, "
                   "measured on an AVX2 AMD EPYC); precision = fp32 is faster on this CPU");
  return str_cat("precision = bf16: this CPU has AVX512-BF16 or AMX-BF16, but products run as ", cpu.method,
                 " (MIRRORED_CPU_BF16=rounded, or a build without oneDNN), slower than fp32; MIRRORED_CPU_BF16=onednn "
                 "or mkl runs them natively");
}

void warn_about_slow_precision(const ModelSpec& spec, Device device, bool chief) {
  if (!chief || spec.precision != Precision::kBF16 || !device.is_cpu()) return;
  const std::string warning = slow_precision_warning(
      spec, device, {kernels::cpu_native_bf16(), kernels::cpu_bf16_runs_native(), kernels::cpu_bf16_method()});
  if (!warning.empty()) rank_warning(warning);
}

}  // namespace mirrored::config
