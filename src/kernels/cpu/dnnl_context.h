#pragma once
// The one oneDNN engine and stream of the process, made on first use, shared by the
// convolution (dnnl_conv.cpp) and matmul (dnnl_matmul.cpp) primitives. Include only where
// MIRRORED_WITH_ONEDNN is defined.
#include <dnnl.hpp>

#include "simd_level.h"

namespace mirrored::kernels::cpu {

// oneDNN's instructions kept within the SIMD level in use (MIRRORED_CPU_SIMD), as they must
// be before its first primitive: a lower level runs what a CPU without AVX-512 runs.
inline bool cap_onednn_isa() {
  switch (simd_level()) {
    case SimdLevel::kAvx512:
      return false;
    case SimdLevel::kAvx2:
      dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx2);
      return true;
    case SimdLevel::kBaseline:
      break;
  }
  dnnl::set_max_cpu_isa(dnnl::cpu_isa::sse41);
  return true;
}

struct DnnlContext {
  bool isa_capped = cap_onednn_isa();  // first: before the engine
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};

inline DnnlContext& dnnl_context() {
  static DnnlContext context;
  return context;
}

}  // namespace mirrored::kernels::cpu
