// The CPU backend's settings and build facts (threads, BLAS core, oneDNN version).
#include <string>

#include "cpu/bf16_backends.h"
#include "cpu/conv_backends.h"
#include "cpu/cpu_kernels.h"
#include "cpu/gemm_backends.h"
#include "cpu/simd_level.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored::kernels {

void set_cpu_threads(int threads) { cpu::set_threads(threads); }

int cpu_threads() { return cpu::threads(); }

void set_cpu_thread_invariant(bool on) { cpu::set_thread_invariant(on); }

std::string cpu_blas_core() { return cpu::blas_core(); }

std::string cpu_blas_core_to_switch_to() { return cpu::blas_core_to_switch_to(); }

void read_cpu_settings() {
  cpu::simd_level();
  cpu::f32_gemm_backend();
  cpu::bf16_gemm_backend();
  cpu::read_conv_setting();
}

std::string cpu_simd_level() { return cpu::simd_level_name(cpu::simd_level()); }

std::string cpu_onednn_version() { return cpu::onednn_version(); }

std::string cpu_f32_gemm_method() {
  return cpu::f32_gemm_backend() == cpu::F32Gemm::kOneDnn ? "oneDNN matmul" : "OpenBLAS sgemm";
}

bool cpu_native_bf16() { return cpu::native_bf16(); }

std::string cpu_bf16_method() {
  switch (cpu::bf16_gemm_backend()) {
    case cpu::Bf16Gemm::kOneDnn:
      return "oneDNN bf16 matmul/convolution";
    case cpu::Bf16Gemm::kMkl:
      return "MKL cblas_gemm_bf16bf16f32 (" + cpu::mkl_bf16_version() + ")";
    case cpu::Bf16Gemm::kRounded:
      break;
  }
  return "rounded inputs, float32 BLAS";
}

bool cpu_bf16_runs_native() { return cpu::native_bf16() && cpu::bf16_gemm_backend() != cpu::Bf16Gemm::kRounded; }

}  // namespace mirrored::kernels
